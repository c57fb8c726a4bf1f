// The fused quantizers' CPU reference (no GPU needed): each equals its unfused sequence
// (RMSNorm or SwiGLU rounded to the input dtype, then quantize; MoE staging = quantize +
// copies), the RMSNorm against float64, our exp against the exact one, the interleaved
// SwiGLU layouts, and argument validation. tests/gpu/ checks the kernels against it.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <type_traits>

#include <fmt/format.h>

#include "common/fused_math.cuh"
#include "core/prewarm.hpp"
#include "expect_error.hpp"
#include "ops/row_quantize_op.hpp"
#include "quantize_fixture.hpp"

using namespace nvfp4::jit;

namespace {

float value_at(const std::vector<uint8_t>& bytes, DType dt, size_t at) {
  if (dt == DType::fp32) {
    float f;
    std::memcpy(&f, &bytes[at * 4], 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, &bytes[at * 2], 2);
  return dt == DType::bf16 ? nvfp4k::bf16_bits_to_float(h) : nvfp4k::fp16_bits_to_float(h);
}

float round_to(DType dt, float f) {
  return dt == DType::bf16 ? nvfp4k::round_to<nvfp4k::DTYPE_BF16>(f)
         : dt == DType::fp16 ? nvfp4k::round_to<nvfp4k::DTYPE_FP16>(f) : f;
}

// Quantizes `values` (rows x k, already in dtype) with quantize(): the unfused result.
struct Quantized {
  std::vector<uint8_t> packed, scales;
  std::vector<float> gscale;
};
Quantized unfused(const std::vector<uint8_t>& values, DType dt, int64_t rows, int64_t k, ScaleLayout layout,
                  GlobalScaleMode mode, float gs) {
  Quantized q{std::vector<uint8_t>(rows * k / 2), std::vector<uint8_t>(scale_bytes(layout, rows, k)), std::vector<float>(rows)};
  QuantizeArgs a;
  a.in = values.data(), a.in_dtype = dt, a.rows = rows, a.k = k;
  a.out = q.packed.data(), a.scales = q.scales.data(), a.scale_layout = layout, a.scale_mode = mode;
  a.global_scale.value = gs;
  a.global_scale_out = q.gscale.data();
  cpu::quantize(a);
  return q;
}

QuantizedOutput output_into(Quantized& q, ScaleLayout layout, GlobalScaleMode mode, float gs) {
  QuantizedOutput o;
  o.data = q.packed.data(), o.scales = q.scales.data(), o.scale_layout = layout, o.scale_mode = mode;
  o.global_scale.value = gs;
  o.global_scale_out = q.gscale.data();
  return o;
}

void check_same(const Quantized& got, const Quantized& want, const std::string& what) {
  for (size_t i = 0; i < want.packed.size(); ++i)
    if (got.packed[i] != want.packed[i]) FAIL(what << ": first wrong packed byte " << i << " (element " << 2 * i << ")");
  for (size_t i = 0; i < want.scales.size(); ++i)
    if (got.scales[i] != want.scales[i]) FAIL(what << ": first wrong scale byte " << i);
  CHECK_MESSAGE(std::memcmp(got.gscale.data(), want.gscale.data(), want.gscale.size() * 4) == 0, what << ": global scales");
}

using testutil::expect_error;

}  // namespace

TEST_SUITE("row_quantize") {
  TEST_CASE("exp_fp32 is within 2 ulp of e^x, and exact at the edges") {
    std::mt19937 rng(std::random_device{}());
    int worst = 0;
    for (int i = 0; i < 200000; ++i) {
      const float x = std::ldexp(float(rng() % 1000000) / 1000000.0f, int(rng() % 8)) * ((rng() & 1) ? 1 : -1);
      const double exact = std::exp(double(x));
      if (exact > 3e38 || exact < 1e-37) continue;  // subnormal results have fewer bits
      const float got = nvfp4k::exp_fp32(x), want = float(exact);
      const int ulps = std::abs(int(nvfp4k::float_to_bits(got)) - int(nvfp4k::float_to_bits(want)));
      worst = std::max(worst, ulps);
      REQUIRE_MESSAGE(ulps <= 2, "x = " << x);
    }
    MESSAGE("exp_fp32: worst error " << worst << " ulp");
    CHECK(nvfp4k::exp_fp32(0.0f) == 1.0f);
    CHECK(std::isinf(nvfp4k::exp_fp32(89.0f)));
    CHECK(nvfp4k::exp_fp32(-104.0f) == 0.0f);
    CHECK(std::isnan(nvfp4k::exp_fp32(NAN)));
    CHECK(nvfp4k::silu_mul(-1000.0f, 1.0f) == 0.0f);
    CHECK(std::isnan(nvfp4k::silu_mul(-INFINITY, 1.0f)));  // -inf / inf, as the formula says
    CHECK(nvfp4k::silu_mul(INFINITY, 1.0f) == INFINITY);
  }

  TEST_CASE("the kernels' packed RMSNorm with an fp32 weight equals rmsnorm_value, both halves, BF16 and FP16") {
    std::mt19937 rng(std::random_device{}());
    int pairs = 0;
    auto check = [&](auto dtype_tag) {
      constexpr int DT = decltype(dtype_tag)::value;
      auto widen = [](unsigned h) { return DT == nvfp4k::DTYPE_BF16 ? nvfp4k::bf16_bits_to_float(h) : nvfp4k::fp16_bits_to_float(h); };
      for (int i = 0; i < 200000; ++i) {
        float x[2], w[2];
        for (int e = 0; e < 2; ++e) {
          x[e] = widen(rng() & 0xFFFFu);  // every 16-bit pattern: NaN, Inf, subnormal and huge included
          w[e] = std::ldexp(float(rng() % 65536) / 32768.0f - 1.0f, int(rng() % 40) - 20);
        }
        const float inv = std::ldexp(1.0f + float(rng() % 1024) / 1024.0f, int(rng() % 30) - 15);
        const unsigned got = nvfp4k::rmsnorm_pair_fp32_weight<DT>(x[0], x[1], inv, w[0], w[1]);
        ++pairs;
        for (int e = 0; e < 2; ++e) {
          const float want = nvfp4k::rmsnorm_value<DT>(x[e], inv, w[e]);
          const float have = widen(got >> (16 * e));
          if (!(have == want || (std::isnan(have) && std::isnan(want))) || std::signbit(have) != std::signbit(want)) {
            FAIL_CHECK("dtype " << DT << " half " << e << ": x " << x[e] << " inv " << inv << " w " << w[e] << ": " << have
                                << " != " << want);
            return;
          }
        }
      }
    };
    check(std::integral_constant<int, nvfp4k::DTYPE_BF16>{});
    check(std::integral_constant<int, nvfp4k::DTYPE_FP16>{});
    CHECK(pairs == 400000);  // every pair checked (a mismatch stops early)
  }

  TEST_CASE("rmsnorm_quantize equals RMSNorm rounded to the dtype, then quantize; RMSNorm within rounding of float64") {
    std::mt19937 rng(std::random_device{}());
    for (DType dt : {DType::bf16, DType::fp16, DType::fp32})
      for (int64_t k : {16, 2880, 8192})
        for (ScaleLayout layout : {ScaleLayout::linear, ScaleLayout::swizzled128x4})
          for (GlobalScaleMode mode : {GlobalScaleMode::given, GlobalScaleMode::compute_per_row}) {
            const int64_t rows = 5;
            const bool weight_fp32 = dt != DType::fp32 && rng() % 2;
            const DType wt = weight_fp32 ? DType::fp32 : dt;
            const auto in = testutil::quantize_input(rows, k, k, dt, rng, false);
            const auto weight = testutil::quantize_input(1, k, k, wt, rng, false);
            const int esize = dt == DType::fp32 ? 4 : 2;
            std::vector<uint8_t> normed(rows * k * esize);
            std::vector<float> inv(rows);
            Quantized got{std::vector<uint8_t>(rows * k / 2), std::vector<uint8_t>(scale_bytes(layout, rows, k)),
                          std::vector<float>(rows)};
            RmsNormQuantizeArgs a;
            a.in = in.data(), a.in_dtype = dt, a.rows = rows, a.k = k, a.weight = weight.data(), a.eps = 1e-6f;
            a.weight_fp32 = weight_fp32;
            a.out = output_into(got, layout, mode, 0.25f);
            a.normed = normed.data(), a.inv_rms = inv.data();
            cpu::rmsnorm_quantize(a);
            const std::string what =
                fmt::format("dtype {} k {} layout {} mode {} weight_fp32 {}", int(dt), k, int(layout), int(mode), weight_fp32);
            check_same(got, unfused(normed, dt, rows, k, layout, mode, 0.25f), what);
            for (int64_t r = 0; r < rows; ++r) {
              double ss = 0;
              for (int64_t e = 0; e < k; ++e) ss += double(value_at(in, dt, r * k + e)) * value_at(in, dt, r * k + e);
              const double exact_inv = 1.0 / std::sqrt(ss / double(k) + 1e-6);
              REQUIRE_MESSAGE(std::fabs(inv[r] - exact_inv) <= 1e-5 * exact_inv, what << " row " << r);
              for (int64_t e = 0; e < k; ++e) {
                const double want = double(value_at(in, dt, r * k + e)) * exact_inv * value_at(weight, wt, e);
                const double ulp = dt == DType::fp32 ? 1e-5 : dt == DType::bf16 ? 0x1p-7 : 0x1p-10;
                // FP16 subnormals add absolute steps: half of 2^-24 in x * inv_rms, scaled by the
                // weight, and again in the product
                const double subnormal_steps = dt == DType::fp16 ? 0x1p-24 * (1 + std::fabs(value_at(weight, wt, e))) : 1e-30;
                REQUIRE_MESSAGE(std::fabs(value_at(normed, dt, r * k + e) - want) <= 2.5 * ulp * std::fabs(want) + subnormal_steps,
                                what << " row " << r << " element " << e);
              }
            }
          }
  }

  TEST_CASE("swiglu_quantize reads every gate / up layout and equals silu(gate) * up rounded, then quantize") {
    std::mt19937 rng(std::random_device{}());
    for (DType dt : {DType::bf16, DType::fp32})
      for (int64_t interleave : {0, 1, 2, 4, 8, 16, 32, 64})
        for (bool adversarial : {false, true}) {
          const int64_t rows = 3, k = 128;
          const auto in = testutil::quantize_input(rows, 2 * k, 2 * k, dt, rng, adversarial);
          // The activation, written out from the layout's definition.
          std::vector<uint8_t> h(rows * k * (dt == DType::fp32 ? 4 : 2));
          const int64_t g = interleave ? interleave : k;
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t run = 0; run < k / g; ++run)  // g gates, then their g ups
              for (int64_t i = 0; i < g; ++i) {
                const float gate = value_at(in, dt, r * 2 * k + run * 2 * g + i);
                const float up = value_at(in, dt, r * 2 * k + run * 2 * g + g + i);
                testutil::store_value(h, dt, size_t(r * k + run * g + i), round_to(dt, nvfp4k::silu_mul(gate, up)));
              }
          Quantized got{std::vector<uint8_t>(rows * k / 2), std::vector<uint8_t>(scale_bytes(ScaleLayout::linear, rows, k)),
                        std::vector<float>(rows)};
          SwigluQuantizeArgs a;
          a.in = in.data(), a.in_dtype = dt, a.rows = rows, a.k = k, a.interleave = interleave;
          a.out = output_into(got, ScaleLayout::linear, GlobalScaleMode::compute_per_row, 1.0f);
          cpu::swiglu_quantize(a);
          check_same(got, unfused(h, dt, rows, k, ScaleLayout::linear, GlobalScaleMode::compute_per_row, 1.0f),
                     fmt::format("dtype {} interleave {} adversarial {}", int(dt), interleave, adversarial));
        }
  }

  TEST_CASE("silu(g) * up against float64") {
    std::mt19937 rng(std::random_device{}());
    std::normal_distribution<float> normal(0.0f, 4.0f);
    for (int i = 0; i < 100000; ++i) {
      const float g = normal(rng), u = normal(rng);
      const double want = double(g) / (1.0 + std::exp(-double(g))) * u;
      REQUIRE_MESSAGE(std::fabs(nvfp4k::silu_mul(g, u) - want) <= 4e-7 * std::fabs(want) + 1e-37, "g = " << g << " u = " << u);
    }
  }

  TEST_CASE("moe_stage equals quantize plus copies of the router's outputs, int32 or int64 ids either side") {
    std::mt19937 rng(std::random_device{}());
    const int64_t rows = 9, k = 64, topk = 3;
    const auto in = testutil::quantize_input(rows, k, k, DType::bf16, rng, true);
    // int64 ids include ones int32 cannot hold (written to an int32 output as -1) and DeepEP's -1
    std::vector<int64_t> ids(rows * topk);
    for (auto& id : ids) id = rng() % 5 == 0 ? -1 : rng() % 7 == 0 ? (int64_t(1) << 33) + 5 : int64_t(rng() % 64);
    std::vector<float> weights(rows * topk), weights_out(rows * topk, -1);
    for (auto& w : weights) w = float(rng() % 100) / 100;
    for (IndexType in_type : {IndexType::int32, IndexType::int64})
      for (IndexType out_type : {IndexType::int32, IndexType::int64}) {
        std::vector<int32_t> ids32(ids.size()), out32(ids.size(), 0x5A5A5A5A);
        std::vector<int64_t> out64(ids.size(), 0x5A5A5A5A5A5A5A5ALL);
        for (size_t i = 0; i < ids.size(); ++i) ids32[i] = ids[i] > INT32_MAX ? 7 : int32_t(ids[i]);
        Quantized got{std::vector<uint8_t>(rows * k / 2), std::vector<uint8_t>(scale_bytes(ScaleLayout::swizzled128x4, rows, k)),
                      std::vector<float>(rows)};
        MoeStageArgs a;
        a.tokens = in.data(), a.rows = rows, a.k = k;
        a.out = output_into(got, ScaleLayout::swizzled128x4, GlobalScaleMode::given, 0.5f);
        a.topk = topk, a.topk_weights = weights.data(), a.topk_weights_out = weights_out.data();
        a.topk_ids_type = in_type, a.topk_ids_out_type = out_type;
        a.topk_ids = in_type == IndexType::int64 ? static_cast<const void*>(ids.data()) : ids32.data();
        a.topk_ids_out = out_type == IndexType::int64 ? static_cast<void*>(out64.data()) : out32.data();
        cpu::moe_stage(a);
        const std::string what = fmt::format("ids {} -> {}", int(in_type), int(out_type));
        check_same(got, unfused(in, DType::bf16, rows, k, ScaleLayout::swizzled128x4, GlobalScaleMode::given, 0.5f), what);
        for (size_t i = 0; i < ids.size(); ++i) {
          const int64_t source = in_type == IndexType::int64 ? ids[i] : ids32[i];
          const int64_t want = out_type == IndexType::int32 && source > INT32_MAX ? -1 : source;
          const int64_t written = out_type == IndexType::int64 ? out64[i] : out32[i];
          REQUIRE_MESSAGE(written == want, what << ": id " << i << " is " << written << ", want " << want);
        }
        CHECK(weights_out == weights);
      }
  }

  TEST_CASE("mhc_rmsnorm_quantize equals the mix stored in the dtype, then rmsnorm_quantize; the mix within rounding of float64") {
    std::mt19937 rng(std::random_device{}());
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (DType dt : {DType::bf16, DType::fp16, DType::fp32})
      for (int64_t n_hc : {1, 2, 3, 4})
        for (int64_t k : {16, 2880})
          for (GlobalScaleMode mode : {GlobalScaleMode::given, GlobalScaleMode::compute_per_row}) {
            const int64_t rows = 6, hc_stride = k + 8 * (n_hc % 2), row_stride = n_hc * hc_stride + 16, mix_stride = n_hc + 1;
            const bool weight_fp32 = dt == DType::fp32 || rng() % 2;
            const DType wt = weight_fp32 ? DType::fp32 : dt;
            const ScaleLayout layout = rng() % 2 ? ScaleLayout::linear : ScaleLayout::swizzled128x4;
            const int esize = dt == DType::fp32 ? 4 : 2;
            // X as rows of row_stride values, each holding n_hc streams hc_stride apart
            const auto x = testutil::quantize_input(rows, row_stride, row_stride, dt, rng, true);
            const auto weight = testutil::quantize_input(1, k, k, wt, rng, false);
            std::vector<float> mix(rows * mix_stride);
            for (auto& m : mix) m = normal(rng);
            std::vector<uint8_t> h(rows * k * esize), normed(rows * k * esize), normed2(rows * k * esize);
            std::vector<float> inv(rows), inv2(rows);
            Quantized got{std::vector<uint8_t>(rows * k / 2), std::vector<uint8_t>(scale_bytes(layout, rows, k)), std::vector<float>(rows)};
            Quantized want = got;
            MhcRmsNormQuantizeArgs a;
            a.in = x.data(), a.in_dtype = dt, a.rows = rows, a.n_hc = n_hc, a.k = k, a.in_row_stride = row_stride;
            a.in_hc_stride = hc_stride, a.mix = mix.data(), a.mix_row_stride = mix_stride;
            a.weight = weight.data(), a.weight_fp32 = weight_fp32, a.eps = 1e-5f;
            a.out = output_into(got, layout, mode, 0.25f);
            a.h = h.data(), a.normed = normed.data(), a.inv_rms = inv.data();
            cpu::mhc_rmsnorm_quantize(a);
            // the unfused sequence: rmsnorm_quantize of the stored mix
            RmsNormQuantizeArgs b;
            b.in = h.data(), b.in_dtype = dt, b.rows = rows, b.k = k, b.weight = weight.data(), b.weight_fp32 = weight_fp32;
            b.eps = 1e-5f, b.out = output_into(want, layout, mode, 0.25f), b.normed = normed2.data(), b.inv_rms = inv2.data();
            cpu::rmsnorm_quantize(b);
            const std::string what = fmt::format("dtype {} n_hc {} k {} mode {} weight_fp32 {}", int(dt), n_hc, k, int(mode), weight_fp32);
            check_same(got, want, what);
            CHECK_MESSAGE(normed == normed2, what << ": normalized rows");
            CHECK_MESSAGE(std::memcmp(inv.data(), inv2.data(), rows * 4) == 0, what << ": 1/rms");
            // h against float64: fp32 products and sums (n_hc roundings of at most the sum of the
            // terms' magnitudes), then one rounding to the dtype
            const double ulp = dt == DType::fp32 ? 0x1p-24 : dt == DType::bf16 ? 0x1p-8 : 0x1p-11;
            // subnormal steps: half of the dtype's, and the fp32 operations' own
            const double tiny = (dt == DType::fp16 ? 0x1p-25 : dt == DType::bf16 ? 0x1p-134 : 0.0) + 2 * n_hc * 0x1p-149;
            for (int64_t r = 0; r < rows; ++r)
              for (int64_t e = 0; e < k; ++e) {
                double exact = 0, magnitude = 0;
                bool finite = true;
                for (int64_t i = 0; i < n_hc; ++i) {
                  const double term = double(mix[r * mix_stride + i]) * value_at(x, dt, r * row_stride + i * hc_stride + e);
                  exact += term, magnitude += std::fabs(term);
                  finite = finite && std::isfinite(term);
                }
                const double got_h = value_at(h, dt, r * k + e);
                if (!finite || (dt == DType::fp16 && std::fabs(exact) > 65000)) continue;  // NaN / Inf inputs, FP16 overflow
                REQUIRE_MESSAGE(std::fabs(got_h - exact) <= ulp * std::fabs(exact) + 2 * n_hc * 0x1p-24 * magnitude + tiny,
                                what << " row " << r << " element " << e << ": h " << got_h << ", float64 " << exact);
              }
          }
  }

  TEST_CASE("bad arguments get an error naming the argument") {
    auto* p = reinterpret_cast<void*>(0x10000);
    RmsNormQuantizeArgs r;
    r.in = p, r.weight = p, r.rows = 4, r.k = 64, r.out.data = p, r.out.scales = p;
    auto rms = [](const RmsNormQuantizeArgs& a) { rmsnorm_quantize(a, nullptr); };
    RmsNormQuantizeArgs b = r;
    b.out.scale_mode = GlobalScaleMode::compute_per_tensor;
    expect_error(b, rms, Status::unsupported, "compute_per_tensor needs the whole tensor");
    b = r, b.k = 65552;
    expect_error(b, rms, Status::invalid_argument, "k = 65552 is larger than 65536");
    b = r, b.k = 49152, b.in_dtype = DType::fp32;
    expect_error(b, rms, Status::invalid_argument, "k = 49152 is larger than 32768, the most one CTA per row holds for fp32");
    b = r, b.k = 40;
    expect_error(b, rms, Status::invalid_argument, "k = 40 must be a positive multiple of 16");
    b = r, b.weight = nullptr;
    expect_error(b, rms, Status::invalid_argument, "weight is null");
    b = r, b.eps = -1.0f;
    expect_error(b, rms, Status::invalid_argument, "eps = -1");
    b = r, b.in_row_stride = 32;
    expect_error(b, rms, Status::invalid_argument, "in_row_stride = 32 is less than");
    b = r, b.normed = p, b.normed_row_stride = 8;
    expect_error(b, rms, Status::invalid_argument, "normed_row_stride = 8");
    b = r, b.out.scale_mode = GlobalScaleMode::compute_per_row;
    expect_error(b, rms, Status::invalid_argument, "out.global_scale_out is null");
    b = r, b.in_dtype = DType::nvfp4;
    expect_error(b, rms, Status::unsupported, "in_dtype = nvfp4");

    SwigluQuantizeArgs s;
    s.in = p, s.rows = 4, s.k = 96, s.out.data = p, s.out.scales = p;
    auto swiglu = [](const SwigluQuantizeArgs& a) { swiglu_quantize(a, nullptr); };
    for (int64_t bad : {3, 24, 64, -16}) {
      SwigluQuantizeArgs t = s;
      t.interleave = bad;
      expect_error(t, swiglu, Status::invalid_argument, "interleave = ");
    }
    SwigluQuantizeArgs t = s;
    t.in_row_stride = 96;
    expect_error(t, swiglu, Status::invalid_argument, "in_row_stride = 96 is less than the row's 192 values");

    MoeStageArgs m;
    m.tokens = p, m.rows = 4, m.k = 64, m.out.data = p, m.out.scales = p, m.topk = 2;
    auto moe = [](const MoeStageArgs& a) { moe_stage(a, nullptr); };
    expect_error(m, moe, Status::invalid_argument, "topk_ids is null");
    m.topk_ids = static_cast<const int32_t*>(p), m.topk_ids_out = static_cast<int32_t*>(p), m.topk_weights = static_cast<const float*>(p);
    expect_error(m, moe, Status::invalid_argument, "topk_weights_out is null");
    MoeStageArgs n = m;
    n.topk_ids_type = IndexType(3);
    expect_error(n, moe, Status::invalid_argument, "topk_ids_type = 3 is not an IndexType");
    n = m, n.topk_ids_out_type = IndexType(-1);
    expect_error(n, moe, Status::invalid_argument, "topk_ids_out_type = -1 is not an IndexType");
    m.topk_weights_out = static_cast<float*>(p);
    n = m, n.topk_ids_type = IndexType::int64, n.topk_ids = reinterpret_cast<const void*>(0x10004);
    expect_error(n, moe, Status::invalid_argument, "topk_ids = 0x10004 is not 8-byte aligned");
    n = m, n.topk_ids_out_type = IndexType::int64, n.topk_ids_out = reinterpret_cast<void*>(0x10004);
    expect_error(n, moe, Status::invalid_argument, "topk_ids_out = 0x10004 is not 8-byte aligned");
    m.topk = -1;
    expect_error(m, moe, Status::invalid_argument, "topk = -1 is negative");

    MhcRmsNormQuantizeArgs h;
    h.in = p, h.rows = 4, h.n_hc = 4, h.k = 64, h.mix = static_cast<const float*>(p), h.weight = p, h.out.data = p, h.out.scales = p;
    auto mhc = [](const MhcRmsNormQuantizeArgs& a) { mhc_rmsnorm_quantize(a, nullptr); };
    MhcRmsNormQuantizeArgs g = h;
    g.n_hc = 5;
    expect_error(g, mhc, Status::invalid_argument, "n_hc = 5 must be 1, 2, 3 or 4");
    g = h, g.in_hc_stride = 32;
    expect_error(g, mhc, Status::invalid_argument, "in_hc_stride = 32 is less than k = 64");
    g = h, g.in_row_stride = 200;
    expect_error(g, mhc, Status::invalid_argument, "in_row_stride = 200 is less than the row's 256 values");
    g = h, g.mix = nullptr;
    expect_error(g, mhc, Status::invalid_argument, "mix is null");
    g = h, g.mix_row_stride = 3;
    expect_error(g, mhc, Status::invalid_argument, "mix_row_stride = 3 is less than n_hc = 4");
    g = h, g.h = p, g.h_row_stride = 32;
    expect_error(g, mhc, Status::invalid_argument, "h_row_stride = 32 is less than k = 64");
    g = h, g.k = 16384 + 16;
    expect_error(g, mhc, Status::invalid_argument, "n_hc * k = 65600 values of 2 bytes is more than the 131072 bytes");
    g = h, g.weight = nullptr;
    expect_error(g, mhc, Status::invalid_argument, "mhc_rmsnorm_quantize: weight is null");
    g = h, g.mix = reinterpret_cast<const float*>(0x10002);
    expect_error(g, mhc, Status::invalid_argument, "mix = 0x10002 is not 4-byte aligned");
    g = h, g.in_hc_stride = 68;
    expect_error(g, mhc, Status::invalid_argument, "in_hc_stride = 68 elements is not a multiple of 16 bytes");
    g = h, g.out.scale_mode = GlobalScaleMode::compute_per_tensor;
    expect_error(g, mhc, Status::unsupported, "compute_per_tensor needs the whole tensor");
    nvfp4_mhc_rmsnorm_quantize_args ch;
    std::memset(&ch, 0, sizeof ch);
    ch.k = 64;
    CHECK(nvfp4_jit_mhc_rmsnorm_quantize(nullptr, nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(std::string(nvfp4_jit_last_error()).find("nvfp4_jit_mhc_rmsnorm_quantize: args is null") != std::string::npos);
    CHECK(nvfp4_jit_mhc_rmsnorm_quantize(&ch, nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(std::string(nvfp4_jit_last_error()).find("n_hc = 0 must be 1, 2, 3 or 4") != std::string::npos);

    // The C twin passes the id types through (zeroed: int32).
    nvfp4_moe_stage_args c;
    std::memset(&c, 0, sizeof c);
    c.tokens = p, c.rows = 4, c.k = 64, c.out.data = p, c.out.scales = p, c.out.global_scale.value = 1.0f, c.topk = 2;
    c.topk_ids = p, c.topk_ids_out = p;
    c.topk_ids_out_type = nvfp4_index_type(2);
    CHECK(nvfp4_jit_moe_stage(&c, nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(std::string(nvfp4_jit_last_error()).find("topk_ids_out_type = 2 is not an IndexType") != std::string::npos);
    c.topk_ids_out_type = NVFP4_INDEX_INT64, c.topk_ids_out = reinterpret_cast<void*>(0x10004);
    CHECK(nvfp4_jit_moe_stage(&c, nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(std::string(nvfp4_jit_last_error()).find("topk_ids_out = 0x10004 is not 8-byte aligned") != std::string::npos);
    m.topk = 0, m.tokens = nullptr;
    expect_error(m, moe, Status::invalid_argument, "tokens is null");
  }

  TEST_CASE("a prewarm holds the fused quantizers of its input dtypes and, for a grouped weight, MoE staging") {
    using namespace nvfp4::jit::detail;
    auto has = [](const std::vector<KernelSpec>& specs, const KernelSpec& spec) {
      return std::find(specs.begin(), specs.end(), spec) != specs.end();
    };
    PrewarmVariants fp16;
    fp16.in_dtypes = {DType::fp16};
    const auto dense = prewarm_specs({WeightShape{"o", 2048, 1536}}, {Arch::sm_90a});
    const auto dense16 = prewarm_specs({WeightShape{"o", 2048, 1536, 1, fp16}}, {Arch::sm_90a});
    const auto experts = prewarm_specs({WeightShape{"experts", 2048, 1536, 8}}, {Arch::sm_90a});
    for (ScaleLayout layout : {ScaleLayout::linear, ScaleLayout::swizzled128x4}) {
      CAPTURE(int(layout));
      const KernelSpec rms16 = row_quantize_spec(Op::rmsnorm_quantize, Arch::sm_90a, 1536, DType::fp16, layout);
      CHECK(has(dense16, rms16));
      CHECK_FALSE(has(dense, rms16));
      CHECK(has(dense, row_quantize_spec(Op::rmsnorm_quantize, Arch::sm_90a, 1536, DType::bf16, layout)));
      for (bool whole_rows : {true, false}) {
        RowKernel stage;
        stage.op = Op::moe_stage, stage.k = 1536, stage.layout = layout, stage.whole_rows = whole_rows;
        CHECK(has(experts, row_quantize_spec(Arch::sm_90a, stage)));
        CHECK_FALSE(has(dense, row_quantize_spec(Arch::sm_90a, stage)));
      }
    }
  }

  TEST_CASE("a prewarm holds RMSNorm and mHC with the norm weights norm-weight names, for many rows and few") {
    using namespace nvfp4::jit::detail;
    auto specs_for = [](const std::string& norm_weight) {
      PrewarmVariants v;
      if (!norm_weight.empty()) REQUIRE(set_prewarm_variant(v, "norm-weight", norm_weight).empty());
      return prewarm_specs({WeightShape{"w", 2048, 4096, 1, v}}, {Arch::sm_90a});
    };
    auto has = [](const std::vector<KernelSpec>& specs, Op op, DType weight, bool few_rows) {
      RowKernel kernel;
      kernel.op = op, kernel.k = 4096, kernel.in = DType::bf16, kernel.weight = weight, kernel.few_rows = few_rows;
      kernel.n_hc = op == Op::mhc_rmsnorm_quantize ? 4 : 0;
      return std::find(specs.begin(), specs.end(), row_quantize_spec(Arch::sm_90a, kernel)) != specs.end();
    };
    const auto usual = specs_for(""), fp32 = specs_for("fp32"), both = specs_for("input,fp32");
    for (bool few_rows : {false, true}) {
      CAPTURE(few_rows);
      CHECK(has(usual, Op::rmsnorm_quantize, DType::bf16, few_rows));
      CHECK_FALSE(has(usual, Op::rmsnorm_quantize, DType::fp32, few_rows));
      CHECK(has(usual, Op::mhc_rmsnorm_quantize, DType::fp32, few_rows));
      CHECK_FALSE(has(usual, Op::mhc_rmsnorm_quantize, DType::bf16, few_rows));
      CHECK(has(fp32, Op::rmsnorm_quantize, DType::fp32, few_rows));
      CHECK_FALSE(has(fp32, Op::rmsnorm_quantize, DType::bf16, few_rows));
      for (Op op : {Op::rmsnorm_quantize, Op::mhc_rmsnorm_quantize})
        for (DType weight : {DType::bf16, DType::fp32}) CHECK(has(both, op, weight, few_rows));
    }
    PrewarmVariants v;
    CHECK(set_prewarm_variant(v, "norm-weight", "bf16") == "norm-weight: `bf16` is not one of input, fp32");
    // fp32 input: its weight is fp32 either way, compiled once
    REQUIRE(set_prewarm_variants(v, "in-dtype=fp32 norm-weight=input,fp32 a-from=rmsnorm").empty());
    const auto fp32_in = prewarm_specs({WeightShape{"w", 2048, 4096, 1, v}}, {Arch::sm_90a});
    CHECK(std::count_if(fp32_in.begin(), fp32_in.end(), [](const KernelSpec& s) { return s.op == Op::rmsnorm_quantize; }) ==
          std::count_if(usual.begin(), usual.end(), [](const KernelSpec& s) { return s.op == Op::rmsnorm_quantize; }));
  }

  TEST_CASE("SwiGLU and MoE staging rows in parts on few rows give each block to two threads, and a prewarm holds them") {
    using namespace nvfp4::jit::detail;
    auto key = [](Op op, DType in, int64_t interleave, bool whole_rows, bool few_rows) {
      RowKernel kernel;
      kernel.op = op, kernel.k = 4096, kernel.in = kernel.weight = in, kernel.interleave = interleave;
      kernel.whole_rows = whole_rows, kernel.few_rows = few_rows;
      return row_quantize_spec(Arch::sm_90a, kernel);
    };
    auto spec = [&](Op op, DType in, int64_t interleave, bool whole_rows, bool few_rows) {
      return key(op, in, interleave, whole_rows, few_rows).as<RowQuantizeSpec>();
    };
    for (Op op : {Op::swiglu_quantize, Op::moe_stage})
      for (DType in : {DType::bf16, DType::fp16}) {
        CAPTURE(int(op));
        const RowQuantizeSpec few = spec(op, in, 0, false, true), many = spec(op, in, 0, false, false);
        CHECK(few.spread == 2);  // two threads a block
        CHECK(few.blocks_per_cta == 64);  // parts of 64 blocks, 64 x 2 threads
        CHECK(few.threads == 64);
        CHECK(many.spread == 1);
        CHECK(spec(op, in, 0, true, true).spread == 1);  // whole rows (a computed global scale)
        CHECK(spec(op, DType::fp32, 0, false, true).spread == 1);
      }
    // SwiGLU whose gates and ups interleave inside a block: whole blocks a thread
    CHECK(spec(Op::swiglu_quantize, DType::bf16, 8, false, true).spread == 1);
    CHECK(spec(Op::swiglu_quantize, DType::bf16, 32, false, true).spread == 2);
    PrewarmVariants v;
    REQUIRE(set_prewarm_variants(v, "a-from=swiglu,stage").empty());
    const auto specs = prewarm_specs({WeightShape{"experts", 2048, 4096, 8, v}}, {Arch::sm_90a});
    for (Op op : {Op::swiglu_quantize, Op::moe_stage})
      for (bool few_rows : {false, true}) {
        CAPTURE(int(op));
        CAPTURE(few_rows);
        CHECK(std::find(specs.begin(), specs.end(), key(op, DType::bf16, 0, false, few_rows)) != specs.end());
      }
  }

  TEST_CASE("a prewarm holds the quantizers of the ops a weight's a-from names, and only those") {
    using namespace nvfp4::jit::detail;
    auto ops_of = [](const std::string& a_from, int32_t groups) {
      PrewarmVariants v;
      if (!a_from.empty()) REQUIRE(set_prewarm_variant(v, "a-from", a_from).empty());
      std::set<Op> ops;
      for (const KernelSpec& s : prewarm_specs({WeightShape{"w", 2048, 1536, groups, v}}, {Arch::sm_90a}))
        if (nlohmann::json::parse(s.to_json()).value("k", 0) == 1536) ops.insert(s.op);
      return ops;
    };
    auto has = [](const std::set<Op>& ops, Op op) { return ops.count(op) == 1; };
    const std::set<Op> swiglu = ops_of("swiglu", 1);
    CHECK(has(swiglu, Op::swiglu_quantize));
    for (Op op : {Op::quantize, Op::row_amax, Op::rmsnorm_quantize, Op::mhc_rmsnorm_quantize, Op::moe_stage})
      CHECK_FALSE(has(swiglu, op));
    CHECK(has(swiglu, Op::dequantize));  // not a writer of activations: every K keeps it
    const std::set<Op> norm = ops_of("quantize,rmsnorm", 1);
    CHECK((has(norm, Op::quantize) && has(norm, Op::row_amax) && has(norm, Op::rmsnorm_quantize)));
    CHECK_FALSE(has(norm, Op::swiglu_quantize));
    CHECK(has(ops_of("mhc", 1), Op::mhc_rmsnorm_quantize));
    CHECK_FALSE(has(ops_of("stage", 1), Op::moe_stage));  // staging is for a grouped weight
    CHECK(has(ops_of("stage", 8), Op::moe_stage));
    CHECK(ops_of("quantize,rmsnorm,swiglu,mhc,stage", 8) == ops_of("", 8));  // the default: every one
  }
}
