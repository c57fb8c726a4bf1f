// quantize on the GPU: bit-identical with the CPU reference (packed values, every scale byte
// including swizzled padding, computed global scales) on random and adversarial inputs,
// with poisoned outputs.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <cstring>

#include "../quantize_fixture.hpp"
#include "common/scale_layout.cuh"
#include "core/gpu_util.hpp"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;

namespace {

struct Case {
  int64_t rows, k;
  DType in;
  ScaleLayout layout;
  GlobalScaleMode mode;
  int given;  // with mode given: 0 host value, 1 device value, 2 device per row
  int64_t in_pad, out_pad;
  bool adversarial;
  float gs = 0.37f;         // the given global scale (and the scale of the adversarial blocks)
  bool full_range = false;  // half the blocks random bit patterns of the dtype (no Inf or NaN)
};

// Every fourth value of every other 16-block a random finite bit pattern of `dt`: every
// exponent from the subnormals up, so with an extreme global scale the quotients reach both
// ends of the float range.
void scatter_full_range(std::vector<uint8_t>& in, int64_t rows, int64_t k, int64_t stride, DType dt, std::mt19937& rng) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t e = 0; e < k; ++e) {
      if ((e / 16) % 2 == 0) continue;
      const size_t at = size_t(r * stride + e);
      if (dt == DType::fp32) {
        uint32_t bits = uint32_t(rng());
        if ((bits & 0x7F800000u) == 0x7F800000u) bits &= 0xBFFFFFFFu;  // Inf or NaN: a finite exponent instead
        std::memcpy(&in[at * 4], &bits, 4);
      } else {
        uint16_t h = uint16_t(rng());
        const uint16_t exp_mask = dt == DType::bf16 ? 0x7F80u : 0x7C00u;
        if ((h & exp_mask) == exp_mask) h &= uint16_t(~(exp_mask & (exp_mask >> 1)) | 0x8000u);
        std::memcpy(&in[at * 2], &h, 2);
      }
    }
}

void run_case(const Case& c, std::mt19937& rng) {
  const int esize = c.in == DType::fp32 ? 4 : 2;
  const int64_t in_stride = c.k + c.in_pad, out_stride = c.k / 2 + c.out_pad;
  const float gs_value = c.gs;
  auto in = testutil::quantize_input(c.rows, c.k, in_stride, c.in, rng, c.adversarial, gs_value);
  if (c.full_range) scatter_full_range(in, c.rows, c.k, in_stride, c.in, rng);
  std::vector<float> row_scales(c.rows);
  for (auto& s : row_scales) s = gs_value * float(1 + rng() % 4);
  const size_t sbytes = size_t(scale_bytes(c.layout, c.rows, c.k));

  DeviceBuffer d_in = to_device(in), d_out(c.rows * out_stride), d_scales(sbytes), d_gs(c.rows * 4);
  DeviceBuffer d_given = to_device(std::vector<float>{gs_value}), d_rows = to_device(row_scales);
  d_out.fill(0xEE);
  d_scales.fill(0xEE);
  d_gs.fill(0xEE);

  QuantizeArgs a;
  a.in = d_in.get();
  a.in_dtype = c.in;
  a.in_row_stride = in_stride;
  a.rows = c.rows;
  a.k = c.k;
  a.out = d_out.get();
  a.out_row_stride_bytes = out_stride;
  a.scales = d_scales.get();
  a.scale_layout = c.layout;
  a.scale_mode = c.mode;
  a.global_scale.value = gs_value;
  if (c.mode == GlobalScaleMode::given && c.given == 1) a.global_scale.device_ptr = d_given.as<float>();
  if (c.mode == GlobalScaleMode::given && c.given == 2) a.global_scale = {1.0f, d_rows.as<float>(), true};
  a.global_scale_out = d_gs.as<float>();
  quantize(a, nullptr);
  check_cu(driver().cuCtxSynchronize(), "quantize kernels");

  std::vector<uint8_t> got_out(c.rows * out_stride), got_scales(sbytes);
  std::vector<float> got_gs(c.rows);
  d_out.download(got_out.data(), got_out.size());
  d_scales.download(got_scales.data(), sbytes);
  d_gs.download(got_gs.data(), got_gs.size() * 4);

  std::vector<uint8_t> want_out(c.rows * out_stride, 0xEE), want_scales(sbytes);
  std::vector<float> want_gs(c.rows);
  std::memset(want_gs.data(), 0xEE, want_gs.size() * 4);
  QuantizeArgs h = a;
  h.in = in.data();
  h.out = want_out.data();
  h.scales = want_scales.data();
  const float given_host = gs_value;
  if (c.mode == GlobalScaleMode::given && c.given == 1) h.global_scale.device_ptr = &given_host;
  if (c.mode == GlobalScaleMode::given && c.given == 2) h.global_scale.device_ptr = row_scales.data();
  h.global_scale_out = want_gs.data();
  cpu::quantize(h);

  const std::string what = fmt::format("rows={} k={} in={} layout={} mode={} given={} adversarial={} gscale={:a} full_range={}",
                                       c.rows, c.k, int(c.in), int(c.layout), int(c.mode), c.given, c.adversarial, c.gs,
                                       c.full_range);
  for (int64_t r = 0; r < c.rows; ++r)
    for (int64_t b = 0; b < out_stride; ++b)
      if (got_out[r * out_stride + b] != want_out[r * out_stride + b]) {
        // The whole block, so the case can be replayed on the CPU.
        const int64_t kb = b / 8;
        std::string inputs;
        for (int i = 0; i < 16; ++i) {
          const size_t at = size_t(r * in_stride + kb * 16 + i);
          uint16_t h = 0;
          float v = 0;
          if (c.in == DType::fp32) std::memcpy(&v, &in[at * 4], 4);
          else std::memcpy(&h, &in[at * 2], 2), v = c.in == DType::bf16 ? nvfp4k::bf16_bits_to_float(h) : nvfp4k::fp16_bits_to_float(h);
          inputs += fmt::format(" {:a}", v);
        }
        const long long off = c.layout == ScaleLayout::linear ? nvfp4k::scale_offset_linear(r, kb, c.k / 16)
                                                              : nvfp4k::scale_offset_swizzled128x4(r, kb, c.k / 16);
        const float gs = c.mode == GlobalScaleMode::compute_per_row ? want_gs[r]
                         : c.mode == GlobalScaleMode::compute_per_tensor ? want_gs[0]
                         : c.given == 2 ? row_scales[r] : gs_value;
        FAIL_CHECK(what << ": first wrong packed byte at row " << r << ", byte " << b << " (elements " << 2 * b << ", "
                        << 2 * b + 1 << "): gpu " << int(got_out[r * out_stride + b]) << " cpu "
                        << int(want_out[r * out_stride + b]) << "; scale gpu " << int(got_scales[off]) << " cpu "
                        << int(want_scales[off]) << fmt::format("; gscale {:a}; block:", gs) << inputs);
        return;
      }
  for (size_t i = 0; i < sbytes; ++i)
    if (got_scales[i] != want_scales[i]) {
      FAIL_CHECK(what << ": first wrong scale byte at offset " << i << ": " << int(got_scales[i]) << " != " << int(want_scales[i]));
      return;
    }
  const size_t ngs = c.mode == GlobalScaleMode::compute_per_row ? c.rows : c.mode == GlobalScaleMode::compute_per_tensor ? 1 : 0;
  if (std::memcmp(got_gs.data(), want_gs.data(), ngs * 4) != 0) FAIL_CHECK(what << ": global_scale_out differs");
}

}  // namespace

TEST_SUITE("gpu_quantize") {
  TEST_CASE("bit-identical with the CPU reference: dtypes, layouts, scale modes, strides, adversarial blocks") {
    std::mt19937 rng(std::random_device{}());
    int cases = 0;
    for (auto [rows, k] : {std::pair<int64_t, int64_t>{1, 16}, {7, 48}, {129, 2880}, {300, 4096}, {64, 8192}})
      for (DType in : {DType::bf16, DType::fp16, DType::fp32})
        for (ScaleLayout layout : {ScaleLayout::linear, ScaleLayout::swizzled128x4})
          for (int mode = 0; mode < 5; ++mode) {
            const GlobalScaleMode m = mode < 3 ? GlobalScaleMode::given : mode == 3 ? GlobalScaleMode::compute_per_tensor
                                                                                   : GlobalScaleMode::compute_per_row;
            const int64_t in_pad = cases % 3 == 0 ? 8 : 0, out_pad = cases % 4 == 1 ? 8 : 0;
            run_case({rows, k, in, layout, m, mode < 3 ? mode : 0, in_pad, out_pad, cases % 2 == 0}, rng);
            ++cases;
          }
    MESSAGE(cases << " quantize cases bit-identical");
  }

  // Block divisors past [2^-100, 2^100] take the quotients scaled by 2^+-64 (nvfp4_quantize.cuh):
  // given global scales from the smallest subnormal to the largest float, on values of every
  // exponent.
  TEST_CASE("bit-identical with the CPU reference at extreme global scales") {
    std::mt19937 rng(std::random_device{}());
    int cases = 0;
    for (float gs : {0x1p-149f, 0x1p-133f, 0x1p-110f, 0x1p-101f, 0x1p-95f, 0x1p95f, 0x1p101f, 0x1p110f, 0x1p126f, 0x1.fffffep127f})
      for (DType in : {DType::bf16, DType::fp16, DType::fp32}) {
        run_case({64, 512, in, ScaleLayout::linear, GlobalScaleMode::given, 0, 0, 0, true, gs, true}, rng);
        ++cases;
      }
    MESSAGE(cases << " cases at extreme global scales bit-identical");
  }

  TEST_CASE("small quantize for the sanitizers") {
    std::mt19937 rng(std::random_device{}());
    run_case({130, 64, DType::bf16, ScaleLayout::swizzled128x4, GlobalScaleMode::compute_per_tensor, 0, 8, 8, true}, rng);
    run_case({5, 32, DType::fp16, ScaleLayout::linear, GlobalScaleMode::compute_per_row, 0, 0, 0, true}, rng);
  }
}
