// Fused quantizers on the GPU (RMSNorm, SwiGLU, MoE staging, mHC + RMSNorm): bit-identical with
// the CPU reference in every output (packed values, scale bytes with swizzled padding, computed
// global scales, mixed and normalized rows, 1/rms, copied router outputs), outputs poisoned
// first; inputs with adversarial blocks and whole rows (zeros, NaN, Inf, huge, subnormal).
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <thread>

#include "../quantize_fixture.hpp"
#include "core/gpu_util.hpp"
#include "core/launcher.hpp"
#include "core/prewarm.hpp"
#include "ops/row_quantize_op.hpp"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;

namespace {

enum class Fused { rmsnorm, swiglu, moe, mhc };

struct RowCase {
  Fused op;
  int64_t rows, k;
  DType in;
  ScaleLayout layout;
  int scale;  // 0 host value, 1 device value, 2 device per row, 3 compute per row
  int64_t interleave, in_pad;
  bool adversarial, extras;  // extras: RMSNorm's normed and inv_rms outputs, MoE's weights
  int id_types = 0;           // MoE: bit 0 int64 ids in, bit 1 int64 ids out
  int n_hc = 0;               // mHC streams (in_pad also pads each stream)
  bool weight_fp32 = false;   // RMSNorm and mHC: an fp32 weight
  float gs = 0.37f;           // the given global scale (per row: 1-4 times it)
};

std::string describe(const RowCase& c) {
  const char* names[] = {"rmsnorm_quantize", "swiglu_quantize", "moe_stage", "mhc_rmsnorm_quantize"};
  return fmt::format("{} rows={} k={} in={} layout={} scale={} interleave={} in_pad={} adversarial={} extras={} id_types={} "
                     "n_hc={} weight_fp32={} gs={:a}",
                     names[int(c.op)], c.rows, c.k, int(c.in), int(c.layout), c.scale, c.interleave, c.in_pad, c.adversarial,
                     c.extras, c.id_types, c.n_hc, c.weight_fp32, c.gs);
}

// Whole adversarial rows over the first rows: zeros, one NaN, one Inf, huge values (their
// squares overflow), subnormal values of the dtype.
void adversarial_rows(std::vector<uint8_t>& in, int64_t rows, int64_t width, int64_t stride, DType dt) {
  const float huge = dt == DType::fp16 ? 6e4f : 3e38f, subnormal = dt == DType::fp16 ? 3e-6f : dt == DType::bf16 ? 2e-39f : 3e-42f;
  for (int64_t r = 0; r < std::min<int64_t>(rows, 5); ++r)
    for (int64_t e = 0; e < width; ++e) {
      float v = 0.0f;
      if (r == 1) v = e == width / 3 ? NAN : 1.0f;
      if (r == 2) v = e == width / 2 ? -INFINITY : -2.0f;
      if (r == 3) v = (e % 2 ? -huge : huge) * float(1 + e % 3) / 3;
      if (r == 4) v = (e % 3 ? subnormal : -subnormal) * float(1 + e % 5);
      testutil::store_value(in, dt, size_t(r * stride + e), v);
    }
}

// The first differing byte of two buffers, or -1. With `floats`, two NaNs are equal (the
// CPU keeps an input NaN's payload where the GPU gives the canonical NaN).
int64_t first_difference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, bool floats = false) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i]) continue;
    if (floats) {
      const size_t at = i / 4 * 4;
      float x, y;
      std::memcpy(&x, &a[at], 4);
      std::memcpy(&y, &b[at], 4);
      if (std::isnan(x) && std::isnan(y)) {
        i = at + 3;
        continue;
      }
    }
    return int64_t(i);
  }
  return -1;
}

void run_case(const RowCase& c, std::mt19937& rng) {
  const int esize = c.in == DType::fp32 ? 4 : 2;
  const int64_t hc_stride = c.k + c.in_pad;
  const int64_t width = c.op == Fused::swiglu ? 2 * c.k : c.op == Fused::mhc ? c.n_hc * hc_stride : c.k;
  const int64_t in_stride = width + c.in_pad, topk = 4;
  const float gs_value = c.gs;
  auto in = testutil::quantize_input(c.rows, width, in_stride, c.in, rng, c.adversarial, gs_value);
  if (c.adversarial) adversarial_rows(in, c.rows, width, in_stride, c.in);
  const DType wt = c.weight_fp32 ? DType::fp32 : c.in;
  auto weight = testutil::quantize_input(1, c.k, c.k, wt, rng, false);
  std::vector<float> mix(c.rows * (c.n_hc + 1));  // row stride n_hc + 1
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto& m : mix) m = normal(rng);
  if (c.adversarial && c.n_hc > 0) mix[0] = 0.0f, mix[c.n_hc + 1] = 1e30f;  // a stream left out, one overflowing
  if (c.adversarial) {  // RMSNorm weights whose products underflow (BF16 / FP16 subnormals, zero) or overflow
    const float extremes[] = {1e-39f, -3e-41f, 6e-8f, 1e-45f, 1e38f, -7e4f};
    for (int64_t e = 0; e < c.k; e += 37) testutil::store_value(weight, wt, size_t(e), extremes[e % 6]);
  }
  std::vector<float> row_scales(c.rows), topk_weights(c.rows * topk);
  for (auto& s : row_scales) s = gs_value * float(1 + rng() % 4);
  for (auto& w : topk_weights) w = float(rng() % 1000) / 1000.0f;
  // int64 ids include DeepEP's -1 and ones an int32 output cannot hold (written as -1)
  const bool ids64 = c.id_types & 1, ids_out64 = c.id_types & 2;
  std::vector<int64_t> topk_ids(c.rows * topk);
  for (auto& id : topk_ids) id = rng() % 9 == 0 ? -1 : ids64 && rng() % 5 == 0 ? (int64_t(3) << 32) + 1 : int64_t(rng() % 256);
  std::vector<uint8_t> ids_bytes(topk_ids.size() * (ids64 ? 8 : 4));
  for (size_t i = 0; i < topk_ids.size(); ++i) {
    const int32_t narrow = int32_t(topk_ids[i]);
    std::memcpy(&ids_bytes[i * (ids64 ? 8 : 4)], ids64 ? static_cast<const void*>(&topk_ids[i]) : &narrow, ids64 ? 8 : 4);
  }
  const size_t ids_out_bytes = topk_ids.size() * (ids_out64 ? 8 : 4);
  const int64_t out_stride = c.k / 2;
  const size_t sbytes = size_t(scale_bytes(c.layout, c.rows, c.k));

  // Device buffers, every output poisoned.
  DeviceBuffer d_mix = to_device(mix), d_h(c.rows * c.k * esize);
  d_h.fill(0xEE);
  DeviceBuffer d_in = to_device(in), d_weight = to_device(weight), d_out(c.rows * out_stride), d_scales(sbytes),
               d_gs(c.rows * 4), d_given = to_device(std::vector<float>{gs_value}), d_rows = to_device(row_scales),
               d_normed(c.rows * c.k * esize), d_inv(c.rows * 4), d_ids = to_device(ids_bytes),
               d_tw = to_device(topk_weights), d_ids_out(ids_out_bytes), d_tw_out(c.rows * topk * 4);
  for (DeviceBuffer* b : {&d_out, &d_scales, &d_gs, &d_normed, &d_inv, &d_ids_out, &d_tw_out}) b->fill(0xEE);

  struct Outputs {
    std::vector<uint8_t> packed, scales, gs, normed, inv, ids, tw, h;
  };
  auto make = [&] {
    return Outputs{std::vector<uint8_t>(c.rows * out_stride, 0xEE), std::vector<uint8_t>(sbytes, 0xEE),
                   std::vector<uint8_t>(c.rows * 4, 0xEE),          std::vector<uint8_t>(c.rows * c.k * esize, 0xEE),
                   std::vector<uint8_t>(c.rows * 4, 0xEE),          std::vector<uint8_t>(ids_out_bytes, 0xEE),
                   std::vector<uint8_t>(c.rows * topk * 4, 0xEE),   std::vector<uint8_t>(c.rows * c.k * esize, 0xEE)};
  };
  const float given_host = gs_value;
  // The output description on either side: device pointers, or host ones for the reference.
  auto output = [&](bool gpu, Outputs& o) {
    QuantizedOutput q;
    q.data = gpu ? d_out.get() : o.packed.data();
    q.scales = gpu ? d_scales.get() : o.scales.data();
    q.scale_layout = c.layout;
    q.global_scale.value = gs_value;
    if (c.scale == 1) q.global_scale.device_ptr = gpu ? d_given.as<float>() : &given_host;
    if (c.scale == 2) q.global_scale = {1.0f, gpu ? d_rows.as<float>() : row_scales.data(), true};
    if (c.scale == 3) q.scale_mode = GlobalScaleMode::compute_per_row;
    q.global_scale_out = gpu ? d_gs.as<float>() : reinterpret_cast<float*>(o.gs.data());
    return q;
  };
  auto run = [&](bool gpu, Outputs& o) {
    const void* input = gpu ? d_in.get() : in.data();
    switch (c.op) {
      case Fused::rmsnorm: {
        RmsNormQuantizeArgs a;
        a.in = input, a.in_dtype = c.in, a.in_row_stride = in_stride, a.rows = c.rows, a.k = c.k;
        a.weight = gpu ? d_weight.get() : weight.data();
        a.weight_fp32 = c.weight_fp32;
        a.eps = 1e-5f;
        a.out = output(gpu, o);
        if (c.extras) {
          a.normed = gpu ? d_normed.get() : o.normed.data();
          a.inv_rms = gpu ? d_inv.as<float>() : reinterpret_cast<float*>(o.inv.data());
        }
        gpu ? rmsnorm_quantize(a, nullptr) : cpu::rmsnorm_quantize(a);
        break;
      }
      case Fused::mhc: {
        MhcRmsNormQuantizeArgs a;
        a.in = input, a.in_dtype = c.in, a.rows = c.rows, a.n_hc = c.n_hc, a.k = c.k;
        a.in_row_stride = in_stride, a.in_hc_stride = hc_stride;
        a.mix = gpu ? d_mix.as<float>() : mix.data(), a.mix_row_stride = c.n_hc + 1;
        a.weight = gpu ? d_weight.get() : weight.data();
        a.weight_fp32 = c.weight_fp32;
        a.eps = 1e-6f;
        a.out = output(gpu, o);
        if (c.extras) {
          a.h = gpu ? d_h.get() : o.h.data();
          a.normed = gpu ? d_normed.get() : o.normed.data();
          a.inv_rms = gpu ? d_inv.as<float>() : reinterpret_cast<float*>(o.inv.data());
        }
        gpu ? mhc_rmsnorm_quantize(a, nullptr) : cpu::mhc_rmsnorm_quantize(a);
        break;
      }
      case Fused::swiglu: {
        SwigluQuantizeArgs a;
        a.in = input, a.in_dtype = c.in, a.in_row_stride = in_stride, a.rows = c.rows, a.k = c.k, a.interleave = c.interleave;
        a.out = output(gpu, o);
        gpu ? swiglu_quantize(a, nullptr) : cpu::swiglu_quantize(a);
        break;
      }
      case Fused::moe: {
        MoeStageArgs a;
        a.tokens = input, a.in_dtype = c.in, a.in_row_stride = in_stride, a.rows = c.rows, a.k = c.k;
        a.out = output(gpu, o);
        a.topk = topk;
        a.topk_ids_type = ids64 ? IndexType::int64 : IndexType::int32;
        a.topk_ids_out_type = ids_out64 ? IndexType::int64 : IndexType::int32;
        a.topk_ids = gpu ? d_ids.get() : static_cast<const void*>(ids_bytes.data());
        a.topk_ids_out = gpu ? d_ids_out.get() : o.ids.data();
        if (c.extras) {
          a.topk_weights = gpu ? d_tw.as<float>() : topk_weights.data();
          a.topk_weights_out = gpu ? d_tw_out.as<float>() : reinterpret_cast<float*>(o.tw.data());
        }
        gpu ? moe_stage(a, nullptr) : cpu::moe_stage(a);
        break;
      }
    }
  };
  Outputs want = make(), got = make();
  run(false, want);
  run(true, got);
  check_cu(driver().cuCtxSynchronize(), "fused quantize kernel");
  d_out.download(got.packed.data(), got.packed.size());
  d_scales.download(got.scales.data(), sbytes);
  d_gs.download(got.gs.data(), got.gs.size());
  d_normed.download(got.normed.data(), got.normed.size());
  d_inv.download(got.inv.data(), got.inv.size());
  d_ids_out.download(got.ids.data(), got.ids.size());
  d_tw_out.download(got.tw.data(), got.tw.size());
  d_h.download(got.h.data(), got.h.size());

  const std::string what = describe(c);
  const std::pair<std::string, int64_t> checks[] = {
      {"packed byte", first_difference(got.packed, want.packed)}, {"scale byte", first_difference(got.scales, want.scales)},
      {"global_scale_out byte", first_difference(got.gs, want.gs)}, {"normed byte", first_difference(got.normed, want.normed, c.in == DType::fp32)},
      {"inv_rms byte", first_difference(got.inv, want.inv, true)},       {"topk_ids_out byte", first_difference(got.ids, want.ids)},
      {"topk_weights_out byte", first_difference(got.tw, want.tw)}, {"h byte", first_difference(got.h, want.h, c.in == DType::fp32)}};
  for (const auto& [name, at] : checks) {
    const int64_t row = name == "packed byte" && at >= 0 ? at / out_stride : -1;
    CHECK_MESSAGE(at < 0, what << ": first wrong " << name << " at " << at
                                << (row >= 0 ? fmt::format(" (row {}, element {})", row, 2 * (at % out_stride)) : ""));
  }
}

// The kernels of `cases`, compiled in parallel threads first (the cases then run one by one).
void prewarm_kernels(const std::vector<RowCase>& cases) {
  const DeviceInfo& device = current_device();
  std::vector<KernelSpec> specs;
  for (const RowCase& c : cases) {
    RowKernel kernel;
    kernel.op = c.op == Fused::rmsnorm ? Op::rmsnorm_quantize : c.op == Fused::swiglu ? Op::swiglu_quantize
              : c.op == Fused::moe     ? Op::moe_stage        : Op::mhc_rmsnorm_quantize;
    kernel.k = c.k, kernel.in = c.in, kernel.weight = c.weight_fp32 ? DType::fp32 : c.in, kernel.layout = c.layout;
    kernel.interleave = c.op == Fused::swiglu ? c.interleave : 0, kernel.n_hc = c.n_hc;
    kernel.whole_rows = c.op == Fused::rmsnorm || c.op == Fused::mhc || c.scale == 3;
    kernel.few_rows = row_quantize_few_rows(c.rows, device.sm_count);
    specs.push_back(row_quantize_spec(device.arch, kernel));
  }
  std::sort(specs.begin(), specs.end(), [](const KernelSpec& a, const KernelSpec& b) { return std::memcmp(&a, &b, sizeof a) < 0; });
  specs.erase(std::unique(specs.begin(), specs.end()), specs.end());
  const PrewarmSummary s = prewarm(specs, int(std::max(1u, std::thread::hardware_concurrency())), nullptr);
  MESSAGE(s.total << " kernels for the cases: " << s.compiled << " compiled, " << s.cached << " cached, in " << s.seconds << " s");
  CHECK(s.failed == 0);
}

}  // namespace

TEST_SUITE("gpu_row_quantize") {
  TEST_CASE("fused quantizers are bit-identical with the CPU reference") {
    std::mt19937 rng(std::random_device{}());
    std::vector<RowCase> cases;
    int variant = 0;
    // RMSNorm and mHC spread few rows over twice the threads (row_quantize.cuh): 130 x 2880,
    // 16 x 7168 and 64 x 8192 run so (on 130 SMs or more), 200 x 4096 does not
    for (auto [rows, k] : {std::pair<int64_t, int64_t>{1, 16}, {7, 48}, {130, 2880}, {16, 7168}, {64, 8192}, {200, 4096},
                           {3, 14336}, {2, 53248}, {2, 65536}})
      for (DType in : {DType::bf16, DType::fp16, DType::fp32})
        for (ScaleLayout layout : {ScaleLayout::linear, ScaleLayout::swizzled128x4})
          for (int scale = 0; scale < 4 && !(in == DType::fp32 && k > 32768); ++scale, ++variant) {
            const bool adversarial = variant % 2 == 0, extras = variant % 3 != 2;
            const int64_t pad = variant % 3 == 0 ? 8 : 0;
            cases.push_back({Fused::rmsnorm, rows, k, in, layout, scale, 0, pad, adversarial, extras});
            // one interleave per scale: 0, 1 or 8, and 32 in parts of rows (given scales; 0 and 32 on few rows
            // by half blocks), 16 whole rows (computed)
            const int64_t interleave = std::array<int64_t, 4>{0, variant % 8 < 4 ? 1 : 8, 32, 16}[scale];
            if (k % std::max<int64_t>(interleave, 1) == 0)
              cases.push_back({Fused::swiglu, rows, k, in, layout, scale, interleave, pad, adversarial, extras});
            cases.push_back({Fused::moe, rows, k, in, layout, scale, 0, pad, adversarial, extras, variant % 4});
            const int n_hc = 1 + variant / 4 % 4;  // one per shape, dtype and layout
            if (k * (in == DType::fp32 ? 4 : 2) * n_hc <= 131072)
              cases.push_back({Fused::mhc, rows, k, in, layout, scale, 0, pad, adversarial, extras, 0, n_hc, variant / 8 % 2 == 1});
            if (in != DType::fp32 && variant % 8 == 5)  // RMSNorm with an fp32 weight (16-bit inputs)
              cases.push_back({Fused::rmsnorm, rows, k, in, layout, scale, 0, pad, !adversarial, extras, 0, 0, true});
          }
    prewarm_kernels(cases);
    for (const RowCase& c : cases) run_case(c, rng);
    MESSAGE(cases.size() << " fused quantize cases bit-identical");
  }

  // The kernels quantize a row by reciprocals alone where its global scale lies in [2^-70, 2^90]
  // (GlobalScale::reciprocal_suffices), else block by block: both sides of both edges, given
  // for the tensor and per row (1-4 times the value), on few rows and on more rows than SMs.
  TEST_CASE("fused quantizers at global scales on both sides of the reciprocal path's range") {
    std::mt19937 rng(std::random_device{}());
    std::vector<RowCase> cases;
    for (float gs : {0x1p-149f, 0x1.fffffep-71f, 0x1p-70f, 0x1p90f, 0x1.000002p90f, 0x1p125f})
      for (DType in : {DType::bf16, DType::fp32})
        for (int64_t rows : {5, 200})
          for (int scale : {0, 2}) {
            const ScaleLayout layout = rows == 5 ? ScaleLayout::linear : ScaleLayout::swizzled128x4;
            cases.push_back({Fused::rmsnorm, rows, 2080, in, layout, scale, 0, 0, true, true, 0, 0, false, gs});
            cases.push_back({Fused::swiglu, rows, 2080, in, layout, scale, 0, 0, true, true, 0, 0, false, gs});
            cases.push_back({Fused::moe, rows, 2080, in, layout, scale, 0, 0, true, true, 1, 0, false, gs});
            cases.push_back({Fused::mhc, rows, 1024, in, layout, scale, 0, 0, true, true, 0, 2, true, gs});
          }
    prewarm_kernels(cases);
    for (const RowCase& c : cases) run_case(c, rng);
    MESSAGE(cases.size() << " fused quantize cases at extreme global scales bit-identical");
  }

  TEST_CASE("small fused quantizers for the sanitizers") {
    std::mt19937 rng(std::random_device{}());
    run_case({Fused::rmsnorm, 130, 64, DType::bf16, ScaleLayout::swizzled128x4, 3, 0, 8, true, true}, rng);
    run_case({Fused::swiglu, 5, 96, DType::fp16, ScaleLayout::linear, 0, 32, 0, true, true}, rng);
    run_case({Fused::moe, 9, 32, DType::bf16, ScaleLayout::swizzled128x4, 2, 0, 0, false, true, 1}, rng);
    run_case({Fused::moe, 9, 32, DType::bf16, ScaleLayout::linear, 0, 0, 0, false, true, 2}, rng);
    run_case({Fused::mhc, 130, 64, DType::bf16, ScaleLayout::swizzled128x4, 3, 0, 8, true, true, 0, 4, true}, rng);
    run_case({Fused::mhc, 7, 48, DType::fp32, ScaleLayout::linear, 1, 0, 0, true, true, 0, 3, true}, rng);
    // few rows, spread over twice the threads
    run_case({Fused::rmsnorm, 16, 8192, DType::bf16, ScaleLayout::swizzled128x4, 3, 0, 8, true, true}, rng);
    run_case({Fused::mhc, 16, 4096, DType::fp16, ScaleLayout::linear, 1, 0, 0, true, true, 0, 4, true}, rng);
    // rows in parts with a given global scale, rows longer than a part: SwiGLU and MoE staging
    // on few rows (half blocks), then on more rows than SMs
    run_case({Fused::swiglu, 5, 8192, DType::bf16, ScaleLayout::swizzled128x4, 0, 0, 8, true, true}, rng);
    run_case({Fused::moe, 5, 8192 + 32, DType::fp16, ScaleLayout::linear, 1, 0, 0, true, true, 3}, rng);
    run_case({Fused::swiglu, 200, 2080, DType::bf16, ScaleLayout::linear, 2, 32, 0, true, true}, rng);
    run_case({Fused::moe, 200, 4128, DType::bf16, ScaleLayout::swizzled128x4, 0, 0, 8, true, true, 1}, rng);
  }
}

TEST_SUITE("gpu_row_quantize") {
  TEST_CASE("rmsnorm_quantize in place: the normalized rows written over the input give the same results") {
    std::mt19937 rng(std::random_device{}());
    const int64_t rows = 37, k = 8192;
    const auto in = testutil::quantize_input(rows, k, k, DType::bf16, rng, false);
    const auto weight = testutil::quantize_input(1, k, k, DType::bf16, rng, false);
    DeviceBuffer d_in = to_device(in), d_in2 = to_device(in), d_w = to_device(weight), d_normed(rows * k * 2),
                 d_out(rows * k / 2), d_out2(rows * k / 2), d_s(rows * k / 16), d_s2(rows * k / 16);
    RmsNormQuantizeArgs a;
    a.in = d_in.get(), a.rows = rows, a.k = k, a.weight = d_w.get();
    a.out.data = d_out.get(), a.out.scales = d_s.get(), a.out.global_scale.value = 0.01f;
    a.normed = d_normed.get();
    rmsnorm_quantize(a, nullptr);
    RmsNormQuantizeArgs b = a;
    b.in = d_in2.get(), b.normed = d_in2.get(), b.out.data = d_out2.get(), b.out.scales = d_s2.get();
    rmsnorm_quantize(b, nullptr);
    check_cu(driver().cuCtxSynchronize(), "rmsnorm_quantize");
    std::vector<uint8_t> n1(rows * k * 2), n2(rows * k * 2), o1(rows * k / 2), o2(rows * k / 2), s1(rows * k / 16),
        s2(rows * k / 16);
    d_normed.download(n1.data(), n1.size());
    d_in2.download(n2.data(), n2.size());
    d_out.download(o1.data(), o1.size());
    d_out2.download(o2.data(), o2.size());
    d_s.download(s1.data(), s1.size());
    d_s2.download(s2.data(), s2.size());
    CHECK_MESSAGE(first_difference(n2, n1) < 0, "rows=37 k=8192: the in-place normalized rows differ");
    CHECK_MESSAGE(first_difference(o2, o1) < 0, "rows=37 k=8192: packed values differ in place");
    CHECK_MESSAGE(first_difference(s2, s1) < 0, "rows=37 k=8192: scales differ in place");
  }
}
