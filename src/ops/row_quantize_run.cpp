#include "ops/row_quantize_run.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "common/fused_math.cuh"
#include "common/nvfp4_quantize.cuh"
#include "common/params.cuh"
#include "common/router_ids.cuh"
#include "common/row_plan.cuh"
#include "common/scale_layout.cuh"
#include "core/driver.hpp"
#include "core/error.hpp"
#include "core/launcher.hpp"
#include "ops/quantize_op.hpp"
#include "ops/spec_names.hpp"
#include "ops/validate.hpp"

namespace nvfp4::jit::detail {

RowJob checked_row_job(Op op, const char* who, const void* in, DType in_dtype, int64_t in_row_stride, int64_t rows,
                       int64_t k, const QuantizedOutput& out, int64_t width) {
  RowJob j;
  j.op = op, j.who = who, j.in = in, j.in_dtype = in_dtype, j.rows = rows, j.k = k, j.out = out;
  Check check(j.who);
  check.positive_multiple("k", j.k, 16, "the NVFP4 block size");
  if (j.k > kRowQuantizeMaxK) check.fail("k", fmt::format("k = {} is larger than {}, the most one CTA per row holds", j.k, kRowQuantizeMaxK));
  if (j.in_dtype == DType::fp32 && j.k > kRowQuantizeMaxKFp32)
    check.fail("k", fmt::format("k = {} is larger than {}, the most one CTA per row holds for fp32 input", j.k, kRowQuantizeMaxKFp32));
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

void add_norm_args(RowJob& j, const void* weight, bool weight_fp32, float eps, void* normed, int64_t normed_row_stride,
                   float* inv_rms) {
  Check check(j.who);
  if (!(eps >= 0.0f && std::isfinite(eps))) check.fail("eps", fmt::format("eps = {} must be finite and not negative", eps));
  if (j.rows > 0) check.not_null("weight", weight);
  j.weight = weight, j.weight_dtype = weight_fp32 ? DType::fp32 : j.in_dtype, j.eps = eps, j.normed = normed, j.inv_rms = inv_rms;
  j.normed_stride = normed_row_stride ? normed_row_stride : j.k;
  if (normed && j.normed_stride < j.k)
    check.fail("normed_row_stride", fmt::format("normed_row_stride = {} is less than k = {}", j.normed_stride, j.k));
}

namespace {

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

}  // namespace

void run_row_job(const RowJob& j, CUstream stream) {
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
  int64_t ctas = rows_padded * ((j.k / 16 + row.blocks_per_cta - 1) / row.blocks_per_cta);
  const int per_thread = nvfp4k::row_per_thread(row.blocks_per_cta, row.threads);
  if (nvfp4k::row_persistent(nvfp4k::row_chunks(row_prologue(j.op), j.n_hc), nvfp4k::row_hold_weights(normalizes(j.op), per_thread)))
    ctas = std::min<int64_t>(ctas, int64_t(device.sm_count) * resident_ctas(fn, row.threads * row.spread));
  if (ctas > 0x7FFFFFFF) check.fail("rows", fmt::format("rows = {} is too large for one launch", j.rows));
  LaunchShape shape;
  shape.grid[0] = unsigned(ctas);
  shape.block[0] = unsigned(row.threads * row.spread);
  void* params[] = {&p};
  launch(fn, shape, stream, params);
}

void run_row_job_on_cpu(const RowJob& j) {
  const int64_t kblocks = j.k / 16;
  const int threads = row_shape(j.kernel()).threads;
  auto* scales = static_cast<uint8_t*>(j.out.scales);
  if (j.rows > 0) std::memset(scales, 0, size_t(nvfp4k::scale_bytes(int(j.out.scale_layout), j.rows, kblocks)));
  std::vector<float> v(size_t(j.k));
  for (int64_t row = 0; row < j.rows; ++row) {
    const int64_t base = row * j.in_stride;
    for (int64_t e = 0; e < j.k; ++e) {
      if (j.op == Op::swiglu_quantize) {
        const int64_t gate = e / j.interleave * 2 * j.interleave + e % j.interleave;
        v[e] = round_to(j.in_dtype, nvfp4k::silu_mul(host_value(j.in, j.in_dtype, base + gate),
                                                     host_value(j.in, j.in_dtype, base + gate + j.interleave)));
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


}  // namespace nvfp4::jit::detail
