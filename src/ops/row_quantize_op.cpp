#include "ops/row_quantize_op.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/fused_math.cuh"
#include "common/nvfp4_quantize.cuh"
#include "common/params.cuh"
#include "common/router_ids.cuh"
#include "common/row_plan.cuh"
#include "common/scale_layout.cuh"
#include "core/driver.hpp"
#include "core/error.hpp"
#include "core/launcher.hpp"
#include "core/op_registry.hpp"
#include "ops/quantize_op.hpp"
#include "ops/spec_names.hpp"
#include "ops/validate.hpp"

namespace nvfp4::jit::detail {

namespace {

// At 1024 threads a thread holds up to 4 blocks of 16 in registers: packed 16-bit values up
// to 65536, fp32 values up to 32768 (2 blocks) without spilling. mHC holds a block's n_hc
// streams too: up to 128 KiB of them a row.
constexpr int64_t kMaxK = 65536, kMaxKFp32 = 32768, kMaxMhcRowBytes = 131072;

bool normalizes(Op op) { return op == Op::rmsnorm_quantize || op == Op::mhc_rmsnorm_quantize; }

// The norm weight a normalizing op usually takes (what prewarm compiles unless told, and what
// its hint leaves unnamed): RMSNorm's in the input's dtype, mHC's in fp32 (as DeepSeek-V4 keeps
// it); and a norm weight's dtype on input of dtype `in`.
NormWeight usual_norm_weight(Op op) { return op == Op::mhc_rmsnorm_quantize ? NormWeight::fp32 : NormWeight::input; }
DType norm_weight_dtype(NormWeight weight, DType in) { return weight == NormWeight::fp32 ? DType::fp32 : in; }

// How a row is spread: `threads` a CTA, each item `slice` blocks of 16; `min_ctas` an SM the
// registers must leave room for (0: as ptxas likes). `spread` threads share each thread's
// blocks after the reduction, whose order stays `threads`' (row_quantize.cuh): the CTA has
// threads * spread threads.
struct RowShape {
  int threads;
  int64_t slice;
  int min_ctas = 0;
  int spread = 1;
};

// Whole rows: about two blocks of 16 per thread, enough loads in flight and few registers
// (mHC too, whose sum of squares must add up in RMSNorm's order). RMSNorm on 16-bit input and
// weights is held to 48 registers (40 warps an SM; on sm_90a only: row_quantize_spec); fp32
// input or weights would spill at 48 (or 64) and run free. SwiGLU spreads a row widest
// instead: one block per thread up to 1024 threads (RMSNorm loses that way).
// Slices: 128 threads with one (SwiGLU) or two blocks each, so that 16 rows of 8192 still make
// 64 or 32 CTAs. SwiGLU's 16-bit slices get up to 64 registers (8 CTAs an SM): their estimate
// paths (common/silu_bf16.cuh, silu_fp16.cuh) then issue all four loads at once without
// spilling. The measurements behind each choice: docs/perf-log.md.
RowShape row_shape(const RowKernel& kernel) {
  const int64_t blocks = kernel.k / 16;
  const int64_t per_thread = kernel.op == Op::swiglu_quantize ? 1 : 2;
  // warps enough for `per` blocks a thread, at most `most` threads
  auto threads_for = [&](int64_t most, int64_t per) { return int(std::clamp<int64_t>((blocks + 32 * per - 1) / (32 * per) * 32, 32, most)); };
  if (kernel.whole_rows) {
    const int threads = threads_for(1024, per_thread);
    // Few rows (a CTA a row, SMs idle): a row's two blocks a thread go to two threads after the
    // sum of squares, which halves each warp's serial chain of instructions. Up to 512 threads
    // (more spill at 64 registers), and not for fp32 mHC (spills at 128).
    const bool spreads = normalizes(kernel.op) && nvfp4k::row_per_thread(blocks, threads) == 2 && 2 * threads <= 512 &&
                         !(kernel.op == Op::mhc_rmsnorm_quantize && kernel.in == DType::fp32);
    if (kernel.few_rows && spreads) return {threads, blocks, 0, 2};
    const bool held_to_48 =
        kernel.op == Op::rmsnorm_quantize && kernel.in != DType::fp32 && kernel.weight != DType::fp32 && threads >= 128;
    return {threads, blocks, held_to_48 ? 1280 / threads : 0};
  }
  const bool sixteen_bit_swiglu = kernel.op == Op::swiglu_quantize && kernel.in != DType::fp32;
  // Few rows of 16-bit tokens (MoE staging) or SwiGLU whose gates and ups come in blocks of
  // their own: two threads a block, slices of up to 64 blocks (SwiGLU: twice the CTAs of 128
  // threads, each warp half the chain; staging: four times, a quarter).
  const bool halves = kernel.in != DType::fp32 &&
                      (kernel.op == Op::moe_stage || (kernel.op == Op::swiglu_quantize && (kernel.group == 0 || kernel.group >= 16)));
  if (kernel.few_rows && halves) {
    const int threads = threads_for(64, 1);
    return {threads, std::min<int64_t>(blocks, threads), 512 / threads, 2};
  }
  const int threads = threads_for(128, per_thread);
  return {threads, std::min<int64_t>(blocks, threads * per_thread), sixteen_bit_swiglu ? 1024 / threads : 0};
}

constexpr int prologue_of(Op op) {
  return op == Op::rmsnorm_quantize       ? nvfp4k::ROW_RMSNORM
         : op == Op::swiglu_quantize      ? nvfp4k::ROW_SWIGLU
         : op == Op::mhc_rmsnorm_quantize ? nvfp4k::ROW_MHC
                                          : nvfp4k::ROW_PLAIN;
}

// What the entry points share once their arguments are checked.
struct RowJob {
  Op op = Op::moe_stage;
  const char* who = "";
  const void* in = nullptr;
  DType in_dtype = DType::bf16;
  int64_t in_stride = 0, rows = 0, k = 0, group = 0;
  // mHC
  int n_hc = 0;
  int64_t hc_stride = 0;
  const float* mix = nullptr;
  int64_t mix_stride = 0;
  void* h = nullptr;
  int64_t h_stride = 0;
  QuantizedOutput out{};
  int64_t out_stride = 0;
  int gscale_mode = 0;
  // RMSNorm
  const void* weight = nullptr;
  DType weight_dtype = DType::bf16;
  float eps = 0;
  void* normed = nullptr;
  int64_t normed_stride = 0;
  float* inv_rms = nullptr;
  // MoE staging
  int64_t topk = 0;
  const void* ids = nullptr;
  const float* weights = nullptr;
  void* ids_out = nullptr;
  float* weights_out = nullptr;
  bool ids_64 = false, ids_out_64 = false;

  RowKernel kernel() const {
    RowKernel r;
    r.op = op, r.k = k, r.in = in_dtype, r.weight = normalizes(op) ? weight_dtype : in_dtype, r.layout = out.scale_layout;
    r.group = op == Op::swiglu_quantize ? group : 0, r.n_hc = n_hc;
    r.whole_rows = normalizes(op) || gscale_mode == nvfp4k::GSCALE_COMPUTE_PER_ROW;
    return r;
  }
};

// The part every fused quantizer has, checked: input, output, global scale. `width` is the
// input row's length.
RowJob common_job(Op op, const char* who, const void* in, DType in_dtype, int64_t in_row_stride, int64_t rows,
                  int64_t k, const QuantizedOutput& out, int64_t width) {
  RowJob j;
  j.op = op, j.who = who, j.in = in, j.in_dtype = in_dtype, j.rows = rows, j.k = k, j.out = out;
  Check check(j.who);
  check.positive_multiple("k", j.k, 16, "the NVFP4 block size");
  if (j.k > kMaxK) check.fail("k", fmt::format("k = {} is larger than {}, the most one CTA per row holds", j.k, kMaxK));
  if (j.in_dtype == DType::fp32 && j.k > kMaxKFp32)
    check.fail("k", fmt::format("k = {} is larger than {}, the most one CTA per row holds for fp32 input", j.k, kMaxKFp32));
  check.not_negative("rows", j.rows);
  check.dtype_in("in_dtype", j.in_dtype, {DType::bf16, DType::fp16, DType::fp32});
  check.scale_layout("out.scale_layout", j.out.scale_layout);
  j.in_stride = in_row_stride ? in_row_stride : width;
  if (j.in_stride < width) check.fail("in_row_stride", fmt::format("in_row_stride = {} is less than the row's {} values", j.in_stride, width));
  j.out_stride = j.out.row_stride_bytes ? j.out.row_stride_bytes : j.k / 2;
  if (j.out_stride < j.k / 2)
    check.fail("out.row_stride_bytes", fmt::format("out.row_stride_bytes = {} is less than k/2 = {}", j.out_stride, j.k / 2));
  switch (j.out.scale_mode) {
    case GlobalScaleMode::given:
      if (!j.out.global_scale.device_ptr && !(j.out.global_scale.value > 0.0f && std::isfinite(j.out.global_scale.value)))
        check.fail("out.global_scale",
                   fmt::format("out.global_scale.value = {} must be positive and finite", j.out.global_scale.value));
      j.gscale_mode = check.global_scale("out.global_scale", j.out.global_scale);
      break;
    case GlobalScaleMode::compute_per_row:
      if (j.rows > 0) check.not_null("out.global_scale_out", j.out.global_scale_out);
      j.gscale_mode = nvfp4k::GSCALE_COMPUTE_PER_ROW;
      break;
    case GlobalScaleMode::compute_per_tensor:
      check.fail("out.scale_mode",
                 "out.scale_mode = compute_per_tensor needs the whole tensor's amax before the first block is "
                 "quantized, which a one-pass fused op cannot have: give the scale, or use compute_per_row",
                 Status::unsupported);
    default:
      check.fail("out.scale_mode", fmt::format("out.scale_mode = {} is not a GlobalScaleMode", int(j.out.scale_mode)));
  }
  if (j.rows > 0) {
    check.not_null(j.op == Op::moe_stage ? "tokens" : "in", j.in);
    check.not_null("out.data", j.out.data);
    check.not_null("out.scales", j.out.scales);
  }
  return j;
}

// RMSNorm's arguments, shared by rmsnorm_quantize and mhc_rmsnorm_quantize.
void add_norm(RowJob& j, const void* weight, bool weight_fp32, float eps, void* normed, int64_t normed_row_stride,
              float* inv_rms) {
  Check check(j.who);
  if (!(eps >= 0.0f && std::isfinite(eps))) check.fail("eps", fmt::format("eps = {} must be finite and not negative", eps));
  if (j.rows > 0) check.not_null("weight", weight);
  j.weight = weight, j.weight_dtype = weight_fp32 ? DType::fp32 : j.in_dtype, j.eps = eps, j.normed = normed, j.inv_rms = inv_rms;
  j.normed_stride = normed_row_stride ? normed_row_stride : j.k;
  if (normed && j.normed_stride < j.k)
    check.fail("normed_row_stride", fmt::format("normed_row_stride = {} is less than k = {}", j.normed_stride, j.k));
}

RowJob job_of(const RmsNormQuantizeArgs& a) {
  RowJob j = common_job(Op::rmsnorm_quantize, "nvfp4::jit::rmsnorm_quantize", a.in, a.in_dtype, a.in_row_stride, a.rows, a.k, a.out, a.k);
  add_norm(j, a.weight, a.weight_fp32, a.eps, a.normed, a.normed_row_stride, a.inv_rms);
  return j;
}

RowJob job_of(const MhcRmsNormQuantizeArgs& a) {
  Check check("nvfp4::jit::mhc_rmsnorm_quantize");
  if (a.n_hc < 1 || a.n_hc > 4) check.fail("n_hc", fmt::format("n_hc = {} must be 1, 2, 3 or 4", a.n_hc));
  const int64_t hc_stride = a.in_hc_stride ? a.in_hc_stride : a.k;
  if (hc_stride < a.k) check.fail("in_hc_stride", fmt::format("in_hc_stride = {} is less than k = {}", hc_stride, a.k));
  // The row is n_hc streams; common_job checks the row stride against what they span.
  const int64_t span = (a.n_hc - 1) * hc_stride + a.k;
  RowJob j = common_job(Op::mhc_rmsnorm_quantize, "nvfp4::jit::mhc_rmsnorm_quantize", a.in, a.in_dtype,
                        a.in_row_stride ? a.in_row_stride : a.n_hc * hc_stride, a.rows, a.k, a.out, span);
  const int64_t row_bytes = a.n_hc * a.k * element_bytes(a.in_dtype);
  if (row_bytes > kMaxMhcRowBytes)
    check.fail("k", fmt::format("n_hc * k = {} values of {} bytes is more than the {} bytes one CTA per row holds", a.n_hc * a.k,
                                element_bytes(a.in_dtype), kMaxMhcRowBytes));
  add_norm(j, a.weight, a.weight_fp32, a.eps, a.normed, a.normed_row_stride, a.inv_rms);
  j.n_hc = int(a.n_hc), j.hc_stride = hc_stride, j.mix = a.mix, j.h = a.h;
  j.mix_stride = a.mix_row_stride ? a.mix_row_stride : a.n_hc;
  if (j.mix_stride < a.n_hc) check.fail("mix_row_stride", fmt::format("mix_row_stride = {} is less than n_hc = {}", j.mix_stride, a.n_hc));
  j.h_stride = a.h_row_stride ? a.h_row_stride : a.k;
  if (a.h && j.h_stride < a.k) check.fail("h_row_stride", fmt::format("h_row_stride = {} is less than k = {}", j.h_stride, a.k));
  if (a.rows > 0) check.not_null("mix", a.mix);
  return j;
}

RowJob job_of(const SwigluQuantizeArgs& a) {
  RowJob j = common_job(Op::swiglu_quantize, "nvfp4::jit::swiglu_quantize", a.in, a.in_dtype, a.in_row_stride, a.rows, a.k, a.out, 2 * a.k);
  Check check(j.who);
  j.group = a.interleave ? a.interleave : a.k;
  const bool divides16 = j.group > 0 && j.group <= 16 && 16 % j.group == 0;
  if (a.interleave < 0 || !(divides16 || j.group % 16 == 0) || a.k % j.group)
    check.fail("interleave", fmt::format("interleave = {} must be 0 (two halves), divide 16 or be a multiple of 16, and "
                                         "divide k = {}", a.interleave, a.k));
  return j;
}

RowJob job_of(const MoeStageArgs& a) {
  RowJob j = common_job(Op::moe_stage, "nvfp4::jit::moe_stage", a.tokens, a.in_dtype, a.in_row_stride, a.rows, a.k, a.out, a.k);
  Check check(j.who);
  check.not_negative("topk", a.topk);
  check.index_type("topk_ids_type", a.topk_ids_type);
  check.index_type("topk_ids_out_type", a.topk_ids_out_type);
  if (a.rows > 0 && a.topk > 0) {
    check.not_null("topk_ids", a.topk_ids);
    check.not_null("topk_ids_out", a.topk_ids_out);
    if (a.topk_weights) check.not_null("topk_weights_out", a.topk_weights_out);
  }
  j.topk = a.topk, j.ids = a.topk_ids, j.weights = a.topk_weights, j.ids_out = a.topk_ids_out, j.weights_out = a.topk_weights_out;
  j.ids_64 = a.topk_ids_type == IndexType::int64, j.ids_out_64 = a.topk_ids_out_type == IndexType::int64;
  return j;
}

// CTAs of `threads` threads of `fn` an SM holds at once: 64 K registers, allocated per warp
// in units of 256 from four quarters of the SM; 64 warps and 32 CTAs at most.
int resident_ctas(CUfunction fn, int threads) {
  thread_local std::unordered_map<CUfunction, int> known;
  if (auto it = known.find(fn); it != known.end()) return it->second;
  int regs = 0;
  check_cu(driver().cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, fn), "cuFuncGetAttribute(registers)");
  const int warp_regs = std::max(1, (regs * 32 + 255) / 256 * 256), warps = threads / 32;
  const int ctas = std::clamp(std::min(4 * (16384 / warp_regs), 64) / warps, 1, 32);
  if (known.size() > 1024) known.clear();
  return known[fn] = ctas;
}

void run_on_gpu(const RowJob& j, CUstream stream) {
  if (j.rows == 0) return;
  Check check(j.who);
  const int esize = element_bytes(j.in_dtype);
  check.aligned(j.op == Op::moe_stage ? "tokens" : "in", j.in, 16);
  if (j.in_stride * esize % 16)
    check.fail("in_row_stride", fmt::format("in_row_stride = {} elements is not a multiple of 16 bytes", j.in_stride));
  check.aligned("out.data", j.out.data, 8);
  if (j.out_stride % 8)
    check.fail("out.row_stride_bytes", fmt::format("out.row_stride_bytes = {} must be a multiple of 8", j.out_stride));
  check.aligned("out.global_scale.device_ptr", j.out.global_scale.device_ptr, 4);
  check.aligned("out.global_scale_out", j.out.global_scale_out, 4);
  check.aligned("weight", j.weight, 16);
  check.aligned("normed", j.normed, 16);
  if (j.normed && j.normed_stride * esize % 16)
    check.fail("normed_row_stride", fmt::format("normed_row_stride = {} elements is not a multiple of 16 bytes", j.normed_stride));
  check.aligned("inv_rms", j.inv_rms, 4);
  check.aligned("topk_ids", j.ids, j.ids_64 ? 8 : 4);
  check.aligned("topk_ids_out", j.ids_out, j.ids_out_64 ? 8 : 4);
  check.aligned("topk_weights", j.weights, 4);
  check.aligned("topk_weights_out", j.weights_out, 4);
  if (j.hc_stride * esize % 16)
    check.fail("in_hc_stride", fmt::format("in_hc_stride = {} elements is not a multiple of 16 bytes", j.hc_stride));
  check.aligned("mix", j.mix, 4);
  check.aligned("h", j.h, 16);
  if (j.h && j.h_stride * esize % 16)
    check.fail("h_row_stride", fmt::format("h_row_stride = {} elements is not a multiple of 16 bytes", j.h_stride));

  const CallDevice call_device(stream, j.out.data, j.who);
  const DeviceInfo& device = call_device.info;
  RowKernel kernel = j.kernel();
  kernel.few_rows = row_quantize_few_rows(j.rows, device.sm_count);
  const KernelSpec spec = row_quantize_spec(device.arch, kernel);
  const CUfunction fn = kernel_for(device, spec, stream, [&] {
    // MoE staging is prewarmed with a grouped weight
    // a norm weight of another dtype than the op's usual one: named
    const bool named_weight = normalizes(j.op) && j.weight_dtype != norm_weight_dtype(usual_norm_weight(j.op), j.in_dtype);
    return fmt::format("nvfp4-jit prewarm --shape {},{}{} --arch {} --in-dtype {}{}", std::max<int64_t>(j.rows, 1), j.k,
                       j.op == Op::moe_stage ? ",2" : "", to_string(device.arch), dtype_name(uint8_t(j.in_dtype)),
                       !named_weight ? "" : j.weight_dtype == DType::fp32 ? " --norm-weight fp32" : " --norm-weight input");
  });
  if (load_only()) return;  // (resident_ctas asks the driver about `fn`)
  nvfp4k::RowQuantizeParams p{};
  p.in = j.in;
  p.in_stride = j.in_stride;
  p.hc_stride = j.hc_stride;
  p.mix = j.mix;
  p.mix_stride = j.mix_stride;
  p.h = j.h;
  p.h_stride = j.h_stride;
  p.packed = static_cast<unsigned char*>(j.out.data);
  p.packed_stride = j.out_stride;
  p.scales = static_cast<unsigned char*>(j.out.scales);
  p.gscale_ptr = j.out.global_scale.device_ptr;
  p.gscale_value = j.out.global_scale.value;
  p.gscale_mode = j.gscale_mode;
  p.gscale_out = j.out.global_scale_out;
  p.rows = j.rows;
  p.norm_weight = j.weight;
  p.eps = j.eps;
  p.normed = j.normed;
  p.normed_stride = j.normed_stride;
  p.inv_rms = j.inv_rms;
  p.topk_ids = j.ids;
  p.topk_weights = j.weights;
  p.topk_ids_out = j.ids_out;
  p.topk_weights_out = j.weights_out;
  p.topk = j.topk;
  p.topk_ids_64 = j.ids_64;
  p.topk_ids_out_64 = j.ids_out_64;
  // One CTA per item, or as many as fit at once where a CTA works on several (row_plan.cuh).
  const RowShape row = row_shape(kernel);
  const int64_t rows_padded = j.out.scale_layout == ScaleLayout::linear ? j.rows : (j.rows + 127) / 128 * 128;
  int64_t ctas = rows_padded * ((j.k / 16 + row.slice - 1) / row.slice);
  const int per_thread = nvfp4k::row_per_thread(row.slice, row.threads);
  if (nvfp4k::row_persistent(nvfp4k::row_chunks(prologue_of(j.op), j.n_hc), nvfp4k::row_hold_weights(normalizes(j.op), per_thread)))
    ctas = std::min<int64_t>(ctas, int64_t(device.sm_count) * resident_ctas(fn, row.threads * row.spread));
  if (ctas > 0x7FFFFFFF) check.fail("rows", fmt::format("rows = {} is too large for one launch", j.rows));
  LaunchShape shape;
  shape.grid[0] = unsigned(ctas);
  shape.block[0] = unsigned(row.threads * row.spread);
  void* params[] = {&p};
  launch(fn, shape, stream, params);
}

// The kernel's sum of squares of one row, in its order (templates/row_quantize.cuh).
float row_sum_sq(const std::vector<float>& x, int threads) {
  const int64_t kblocks = int64_t(x.size()) / 16;
  std::vector<float> lanes(size_t(threads), 0.0f);
  for (int t = 0; t < threads; ++t)
    for (int64_t kb = t; kb < kblocks; kb += threads)
      for (int i = 0; i < 16; ++i) lanes[t] = nvfp4k::fma_rn(x[kb * 16 + i], x[kb * 16 + i], lanes[t]);
  float total = 0.0f;
  for (int w = 0; w < threads / 32; ++w) {
    float* s = lanes.data() + w * 32;
    for (int offset = 16; offset > 0; offset /= 2) {
      float next[32];
      for (int l = 0; l < 32; ++l) next[l] = nvfp4k::add_rn(s[l], s[l ^ offset]);
      std::copy(next, next + 32, s);
    }
    total = nvfp4k::add_rn(total, s[0]);
  }
  return total;
}

float round_to(DType d, float f) {
  switch (d) {
    case DType::bf16: return nvfp4k::round_to<nvfp4k::DTYPE_BF16>(f);
    case DType::fp16: return nvfp4k::round_to<nvfp4k::DTYPE_FP16>(f);
    default: return f;
  }
}

void run_on_cpu(const RowJob& j) {
  const int64_t kblocks = j.k / 16;
  const int threads = row_shape(j.kernel()).threads;
  auto* scales = static_cast<uint8_t*>(j.out.scales);
  if (j.rows > 0) std::memset(scales, 0, size_t(nvfp4k::scale_bytes(int(j.out.scale_layout), j.rows, kblocks)));
  std::vector<float> v(size_t(j.k));
  for (int64_t row = 0; row < j.rows; ++row) {
    const int64_t base = row * j.in_stride;
    for (int64_t e = 0; e < j.k; ++e) {
      if (j.op == Op::swiglu_quantize) {
        const int64_t gate = e / j.group * 2 * j.group + e % j.group;
        v[e] = round_to(j.in_dtype, nvfp4k::silu_mul(host_value(j.in, j.in_dtype, base + gate),
                                                     host_value(j.in, j.in_dtype, base + gate + j.group)));
      } else if (j.op == Op::mhc_rmsnorm_quantize) {
        const float* a = j.mix + row * j.mix_stride;
        float h = nvfp4k::mul_rn(a[0], host_value(j.in, j.in_dtype, base + e));
        for (int i = 1; i < j.n_hc; ++i) h = nvfp4k::add_rn(h, nvfp4k::mul_rn(a[i], host_value(j.in, j.in_dtype, base + i * j.hc_stride + e)));
        v[e] = round_to(j.in_dtype, h);
        if (j.h) store_host_value(j.h, j.in_dtype, row * j.h_stride + e, v[e]);
      } else {
        v[e] = host_value(j.in, j.in_dtype, base + e);
      }
    }
    if (normalizes(j.op)) {
      const float inv = nvfp4k::inv_rms(row_sum_sq(v, threads), float(j.k), j.eps);
      if (j.inv_rms) j.inv_rms[row] = inv;
      for (int64_t e = 0; e < j.k; ++e) {
        const float w = host_value(j.weight, j.weight_dtype, e);
        const float n = round_to(j.in_dtype, nvfp4k::mul_rn(round_to(j.in_dtype, nvfp4k::mul_rn(v[e], inv)), w));
        v[e] = n;
        if (j.normed) store_host_value(j.normed, j.in_dtype, row * j.normed_stride + e, n);
      }
    }
    float gscale = j.out.global_scale.value;
    if (j.gscale_mode == nvfp4k::GSCALE_COMPUTE_PER_ROW) {
      float amax = 0;
      for (float x : v)
        if (nvfp4k::is_finite(x)) amax = std::max(amax, std::fabs(x));
      gscale = j.out.global_scale_out[row] = nvfp4k::global_scale_from_amax(amax);
    } else if (j.gscale_mode != nvfp4k::GSCALE_HOST) {
      gscale = j.out.global_scale.device_ptr[j.gscale_mode == nvfp4k::GSCALE_DEVICE ? 0 : row];
    }
    for (int64_t kb = 0; kb < kblocks; ++kb) {
      float x[16];
      std::copy(v.begin() + kb * 16, v.begin() + kb * 16 + 16, x);
      unsigned packed[2];
      const int64_t off = j.out.scale_layout == ScaleLayout::linear ? nvfp4k::scale_offset_linear(row, kb, kblocks)
                                                                    : nvfp4k::scale_offset_swizzled128x4(row, kb, kblocks);
      scales[off] = nvfp4k::quantize_block16(x, gscale, packed);
      std::memcpy(static_cast<char*>(j.out.data) + row * j.out_stride + kb * 8, packed, 8);
    }
    for (int64_t i = 0; i < j.topk; ++i) {
      const int64_t at = row * j.topk + i;
      nvfp4k::store_id(j.ids_out, j.ids_out_64, at, nvfp4k::load_id(j.ids, j.ids_64, at));
      if (j.weights) j.weights_out[row * j.topk + i] = j.weights[row * j.topk + i];
    }
  }
}

}  // namespace

KernelSpec row_quantize_spec(Arch arch, const RowKernel& kernel) {
  const RowShape row = row_shape(kernel);
  RowQuantizeSpec spec;
  spec.k = kernel.k;
  spec.in_dtype = kernel.in;
  spec.norm_weight_dtype = normalizes(kernel.op) ? kernel.weight : kernel.in;
  spec.scale_layout = kernel.layout;
  spec.swiglu_interleave = kernel.op == Op::swiglu_quantize ? (kernel.group ? kernel.group : kernel.k) : 1;
  spec.mhc_streams = kernel.op == Op::mhc_rmsnorm_quantize ? kernel.n_hc : 0;
  spec.blocks_per_cta = int(row.slice);
  spec.threads = row.threads;
  spec.spread = row.spread;
  // RMSNorm's hold to 48 registers was measured on sm_90a; sm_100a and sm_120a spill under it.
  spec.min_ctas_per_sm = kernel.op == Op::rmsnorm_quantize && arch != Arch::sm_90a ? 0 : row.min_ctas;
  return KernelSpec::of(arch, kernel.op, spec);
}

KernelSpec row_quantize_spec(Op op, Arch arch, int64_t k, DType in, ScaleLayout layout, int64_t group) {
  RowKernel kernel;
  kernel.op = op, kernel.k = k, kernel.in = kernel.weight = in, kernel.layout = layout, kernel.group = group;
  return row_quantize_spec(arch, kernel);
}

namespace {

std::string row_quantize_kernel_name(const KernelSpec& key) {
  const RowQuantizeSpec spec = key.as<RowQuantizeSpec>();
  std::string name = fmt::format("nvfp4_{}_k{}_{}_{}", to_string(key.op), spec.k, dtype_name(spec.in_dtype),
                                 scale_layout_name(spec.scale_layout));
  if (key.op == Op::swiglu_quantize) name += fmt::format("_g{}", spec.swiglu_interleave);
  if (key.op == Op::mhc_rmsnorm_quantize) name += fmt::format("_hc{}", spec.mhc_streams);
  if (spec.norm_weight_dtype != spec.in_dtype) name += fmt::format("_w{}", dtype_name(spec.norm_weight_dtype));
  if (spec.blocks_per_cta != spec.k / 16) name += fmt::format("_slice{}", spec.blocks_per_cta);
  if (spec.min_ctas_per_sm) name += fmt::format("_min{}", spec.min_ctas_per_sm);
  if (spec.spread > 1) name += fmt::format("_spread{}", spec.spread);
  return name;
}

nlohmann::ordered_json row_quantize_json(const KernelSpec& key) {
  const RowQuantizeSpec spec = key.as<RowQuantizeSpec>();
  nlohmann::ordered_json j{{"k", spec.k}, {"in_dtype", dtype_name(spec.in_dtype)}};
  if (normalizes(key.op)) j["norm_weight_dtype"] = dtype_name(spec.norm_weight_dtype);
  j["scale_layout"] = scale_layout_name(spec.scale_layout);
  if (key.op == Op::swiglu_quantize) j["swiglu_interleave"] = spec.swiglu_interleave;
  if (key.op == Op::mhc_rmsnorm_quantize) j["mhc_streams"] = spec.mhc_streams;
  j.update({{"blocks_per_cta", spec.blocks_per_cta}, {"threads", spec.threads}, {"spread", spec.spread},
            {"min_ctas_per_sm", spec.min_ctas_per_sm}});
  return j;
}

constexpr OpKernels kRowQuantizeKernels{.generate = generate_row_quantize, .kernel_name = row_quantize_kernel_name,
                                        .to_json = row_quantize_json};
const bool registered =
    register_op(Op::rmsnorm_quantize, kRowQuantizeKernels) && register_op(Op::swiglu_quantize, kRowQuantizeKernels) &&
    register_op(Op::moe_stage, kRowQuantizeKernels) && register_op(Op::mhc_rmsnorm_quantize, kRowQuantizeKernels) &&
    register_prewarm(40, [](Arch arch, const WeightShape& shape, int) { return row_quantize_prewarm_specs(arch, shape); });

}  // namespace

GeneratedKernel generate_row_quantize(const KernelSpec& key) {
  const RowQuantizeSpec spec = key.as<RowQuantizeSpec>();
  return entry_point(key, spec.threads * spec.spread, row_quantize_kernel_name(key), "row_quantize.cuh", "RowQuantizeParams",
                     fmt::format("nvfp4k::row_quantize<{}, {}, {}, {}LL, {}LL, {}, {}, {}, {}LL, {}>(p)", prologue_of(key.op),
                                 int(spec.in_dtype), int(spec.norm_weight_dtype), spec.k, spec.swiglu_interleave,
                                 spec.mhc_streams, int(spec.scale_layout), spec.threads, spec.blocks_per_cta, spec.spread),
                     spec.min_ctas_per_sm);
}

std::vector<KernelSpec> row_quantize_prewarm_specs(Arch arch, const WeightShape& shape) {
  std::vector<KernelSpec> specs;
  const int64_t k = shape.k;
  if (k <= 0 || k % 16 || k > kMaxK) return specs;
  const PrewarmVariants& v = shape.variants;
  for (DType in : v.in_dtypes.empty() ? std::vector<DType>{DType::bf16} : v.in_dtypes) {
    if (in == DType::fp32 && k > kMaxKFp32) continue;
    for (ScaleLayout layout : {ScaleLayout::linear, ScaleLayout::swizzled128x4}) {
      RowKernel kernel;
      kernel.k = k, kernel.layout = layout, kernel.in = in, kernel.weight = in;
      // RMSNorm and mHC: for many rows and for few (row_shape), where the two differ
      auto push_rows_both_ways = [&](RowKernel rows_kernel) {
        specs.push_back(row_quantize_spec(arch, rows_kernel));
        rows_kernel.few_rows = true;
        if (const KernelSpec few = row_quantize_spec(arch, rows_kernel); !(few == specs.back())) specs.push_back(few);
      };
      // the norm weight's dtypes a variant names, or the op's usual one
      auto norm_weights = [&](Op op) {
        std::vector<DType> dtypes;
        for (NormWeight w : v.norm_weights.empty() ? std::vector<NormWeight>{usual_norm_weight(op)} : v.norm_weights) {
          const DType dtype = norm_weight_dtype(w, in);  // (fp32 input: one dtype either way)
          if (std::find(dtypes.begin(), dtypes.end(), dtype) == dtypes.end()) dtypes.push_back(dtype);
        }
        return dtypes;
      };
      kernel.op = Op::rmsnorm_quantize;
      if (v.writes_a(AFrom::rmsnorm))
        for (DType weight : norm_weights(kernel.op)) kernel.weight = weight, push_rows_both_ways(kernel);
      kernel.weight = in;
      for (auto [op, from] : {std::pair{Op::swiglu_quantize, AFrom::swiglu}, std::pair{Op::moe_stage, AFrom::stage}}) {
        if (!v.writes_a(from) || (op == Op::moe_stage && shape.groups <= 1)) continue;
        kernel.op = op;
        for (bool whole_rows : {true, false}) {
          kernel.whole_rows = whole_rows;
          push_rows_both_ways(kernel);
        }
      }
      kernel.op = Op::mhc_rmsnorm_quantize, kernel.n_hc = 4, kernel.whole_rows = true;
      if (v.writes_a(AFrom::mhc) && 4 * k * element_bytes(in) <= kMaxMhcRowBytes)
        for (DType weight : norm_weights(kernel.op)) kernel.weight = weight, push_rows_both_ways(kernel);
    }
  }
  return specs;
}

}  // namespace nvfp4::jit::detail

namespace nvfp4::jit {

using namespace detail;

void rmsnorm_quantize(const RmsNormQuantizeArgs& args, CUstream stream) { run_on_gpu(job_of(args), stream); }
void swiglu_quantize(const SwigluQuantizeArgs& args, CUstream stream) { run_on_gpu(job_of(args), stream); }
void moe_stage(const MoeStageArgs& args, CUstream stream) { run_on_gpu(job_of(args), stream); }
void mhc_rmsnorm_quantize(const MhcRmsNormQuantizeArgs& args, CUstream stream) { run_on_gpu(job_of(args), stream); }

void cpu::rmsnorm_quantize(const RmsNormQuantizeArgs& args) { run_on_cpu(job_of(args)); }
void cpu::swiglu_quantize(const SwigluQuantizeArgs& args) { run_on_cpu(job_of(args)); }
void cpu::moe_stage(const MoeStageArgs& args) { run_on_cpu(job_of(args)); }
void cpu::mhc_rmsnorm_quantize(const MhcRmsNormQuantizeArgs& args) { run_on_cpu(job_of(args)); }

}  // namespace nvfp4::jit
