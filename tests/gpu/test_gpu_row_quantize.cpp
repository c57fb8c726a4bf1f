// Fused quantizers on the GPU (RMSNorm, SwiGLU, MoE staging): bit-identical with the CPU
// reference in every output (packed values, scale bytes with swizzled padding, computed
// global scales, normalized rows, 1/rms, copied router outputs), outputs poisoned first.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "../quantize_fixture.hpp"
#include "core/gpu_util.hpp"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;

namespace {

enum class Fused { rmsnorm, swiglu, moe };

struct RowCase {
  Fused op;
  int64_t rows, k;
  DType in;
  ScaleLayout layout;
  int scale;  // 0 host value, 1 device value, 2 device per row, 3 compute per row
  int64_t interleave, in_pad;
  bool adversarial, extras;  // extras: RMSNorm's normed and inv_rms outputs, MoE's weights
};

std::string describe(const RowCase& c) {
  const char* names[] = {"rmsnorm_quantize", "swiglu_quantize", "moe_stage"};
  return fmt::format("{} rows={} k={} in={} layout={} scale={} interleave={} in_pad={} adversarial={} extras={}",
                     names[int(c.op)], c.rows, c.k, int(c.in), int(c.layout), c.scale, c.interleave, c.in_pad, c.adversarial,
                     c.extras);
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
  const int64_t width = c.op == Fused::swiglu ? 2 * c.k : c.k, in_stride = width + c.in_pad, topk = 4;
  const float gs_value = 0.37f;
  const auto in = testutil::quantize_input(c.rows, width, in_stride, c.in, rng, c.adversarial, gs_value);
  auto weight = testutil::quantize_input(1, c.k, c.k, c.in, rng, false);
  if (c.adversarial) {  // RMSNorm weights whose products underflow (BF16 / FP16 subnormals, zero) or overflow
    const float extremes[] = {1e-39f, -3e-41f, 6e-8f, 1e-45f, 1e38f, -7e4f};
    for (int64_t e = 0; e < c.k; e += 37) testutil::store_value(weight, c.in, size_t(e), extremes[e % 6]);
  }
  std::vector<float> row_scales(c.rows), topk_weights(c.rows * topk);
  for (auto& s : row_scales) s = gs_value * float(1 + rng() % 4);
  for (auto& w : topk_weights) w = float(rng() % 1000) / 1000.0f;
  std::vector<int32_t> topk_ids(c.rows * topk);
  for (auto& id : topk_ids) id = int32_t(rng() % 256);
  const int64_t out_stride = c.k / 2;
  const size_t sbytes = size_t(scale_bytes(c.layout, c.rows, c.k));

  // Device buffers, every output poisoned.
  DeviceBuffer d_in = to_device(in), d_weight = to_device(weight), d_out(c.rows * out_stride), d_scales(sbytes),
               d_gs(c.rows * 4), d_given = to_device(std::vector<float>{gs_value}), d_rows = to_device(row_scales),
               d_normed(c.rows * c.k * esize), d_inv(c.rows * 4), d_ids = to_device(topk_ids),
               d_tw = to_device(topk_weights), d_ids_out(c.rows * topk * 4), d_tw_out(c.rows * topk * 4);
  for (DeviceBuffer* b : {&d_out, &d_scales, &d_gs, &d_normed, &d_inv, &d_ids_out, &d_tw_out}) b->fill(0xEE);

  struct Outputs {
    std::vector<uint8_t> packed, scales, gs, normed, inv, ids, tw;
  };
  auto make = [&] {
    return Outputs{std::vector<uint8_t>(c.rows * out_stride, 0xEE), std::vector<uint8_t>(sbytes, 0xEE),
                   std::vector<uint8_t>(c.rows * 4, 0xEE),          std::vector<uint8_t>(c.rows * c.k * esize, 0xEE),
                   std::vector<uint8_t>(c.rows * 4, 0xEE),          std::vector<uint8_t>(c.rows * topk * 4, 0xEE),
                   std::vector<uint8_t>(c.rows * topk * 4, 0xEE)};
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
        a.eps = 1e-5f;
        a.out = output(gpu, o);
        if (c.extras) {
          a.normed = gpu ? d_normed.get() : o.normed.data();
          a.inv_rms = gpu ? d_inv.as<float>() : reinterpret_cast<float*>(o.inv.data());
        }
        gpu ? rmsnorm_quantize(a, nullptr) : cpu::rmsnorm_quantize(a);
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
        a.topk_ids = gpu ? d_ids.as<int32_t>() : topk_ids.data();
        a.topk_ids_out = gpu ? d_ids_out.as<int32_t>() : reinterpret_cast<int32_t*>(o.ids.data());
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

  const std::string what = describe(c);
  const std::pair<std::string, int64_t> checks[] = {
      {"packed byte", first_difference(got.packed, want.packed)}, {"scale byte", first_difference(got.scales, want.scales)},
      {"global_scale_out byte", first_difference(got.gs, want.gs)}, {"normed byte", first_difference(got.normed, want.normed, c.in == DType::fp32)},
      {"inv_rms byte", first_difference(got.inv, want.inv, true)},       {"topk_ids_out byte", first_difference(got.ids, want.ids)},
      {"topk_weights_out byte", first_difference(got.tw, want.tw)}};
  for (const auto& [name, at] : checks) {
    const int64_t row = name == "packed byte" && at >= 0 ? at / out_stride : -1;
    CHECK_MESSAGE(at < 0, what << ": first wrong " << name << " at " << at
                                << (row >= 0 ? fmt::format(" (row {}, element {})", row, 2 * (at % out_stride)) : ""));
  }
}

}  // namespace

TEST_SUITE("gpu_row_quantize") {
  TEST_CASE("fused quantizers are bit-identical with the CPU reference") {
    std::mt19937 rng(std::random_device{}());
    int cases = 0;
    for (auto [rows, k] : {std::pair<int64_t, int64_t>{1, 16}, {7, 48}, {130, 2880}, {64, 8192}, {3, 14336}, {2, 53248}, {2, 65536}})
      for (DType in : {DType::bf16, DType::fp16, DType::fp32})
        for (ScaleLayout layout : {ScaleLayout::linear, ScaleLayout::swizzled128x4})
          for (int scale = 0; scale < 4 && !(in == DType::fp32 && k > 32768); ++scale) {
            const int variant = cases / 6;
            const bool adversarial = variant % 2 == 0, extras = variant % 3 != 2;
            const int64_t pad = variant % 3 == 0 ? 8 : 0;
            run_case({Fused::rmsnorm, rows, k, in, layout, scale, 0, pad, adversarial, extras}, rng);
            for (int64_t interleave : {0, 1, 8, 16})
              if (k % std::max<int64_t>(interleave, 1) == 0)
                run_case({Fused::swiglu, rows, k, in, layout, scale, interleave, pad, adversarial, extras}, rng);
            run_case({Fused::moe, rows, k, in, layout, scale, 0, pad, adversarial, extras}, rng);
            cases += 6;
          }
    MESSAGE(cases << " fused quantize cases bit-identical");
  }

  TEST_CASE("small fused quantizers for the sanitizers") {
    std::mt19937 rng(std::random_device{}());
    run_case({Fused::rmsnorm, 130, 64, DType::bf16, ScaleLayout::swizzled128x4, 3, 0, 8, true, true}, rng);
    run_case({Fused::swiglu, 5, 96, DType::fp16, ScaleLayout::linear, 0, 32, 0, true, true}, rng);
    run_case({Fused::moe, 9, 32, DType::bf16, ScaleLayout::swizzled128x4, 2, 0, 0, false, true}, rng);
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
