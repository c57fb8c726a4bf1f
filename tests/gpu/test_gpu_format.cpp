// The format helpers as the GPU compiles them, against the plain IEEE formulas on the same
// device: every finite FP16 value x (both signs, both zeros), every finite E4M3 scale s, a few
// global scales g, for both divisions (two FMA corrections, and one as for 16-bit inputs). And
// the block quantizers' Blackwell path, its E2M1 conversion replaced by the definition, and the
// E4M3 conversion every arch uses against its definition.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/driver.hpp"
#include "core/gpu_util.hpp"
#include "core/launcher.hpp"
#include "core/nvrtc_compiler.hpp"
#include "common/nvfp4_quantize.cuh"
#include "probe_kernel.hpp"
#include "quantize_fixture.hpp"

using namespace nvfp4::jit::detail;

namespace {

const char* kProbe = R"(
#include "common/nvfp4_quantize.cuh"
extern "C" __global__ void probe(const float* gscales, int n_g, unsigned long long* counts) {
  const unsigned h = blockIdx.x * blockDim.x + threadIdx.x;  // every finite FP16, both signs, both zeros
  if ((h & 0x7FFFu) >= 0x7C00u) return;
  const float x = nvfp4k::fp16_bits_to_float(h);
  unsigned long long bad_div = 0, bad_code = 0, bad_narrow = 0;
  for (int gi = 0; gi < n_g; ++gi)
    for (unsigned s = 1; s < 0x7F; ++s) {
      const float d = nvfp4k::e4m3_to_float(s) * gscales[gi];
      const float a = fabsf(x), fast = nvfp4k::divide_rn_nonneg(a, d, 1.0f / d), ieee = __fdiv_rn(a, d);
      bad_div += __float_as_uint(fast) != __float_as_uint(ieee);  // bits: +0 must stay +0
      // one correction, as for BF16 / FP16 inputs
      bad_narrow += __float_as_uint(nvfp4k::divide_rn_nonneg<true>(a, d, 1.0f / d)) != __float_as_uint(ieee);
      // the kernels' code (least of three roundings) against the definition on the IEEE quotient
      bad_code += nvfp4k::e2m1_code_plus_2p23(fast) - 0x4B000000u != nvfp4k::float_to_e2m1_satfinite(ieee);
    }
  atomicAdd(&counts[0], bad_div);
  atomicAdd(&counts[1], bad_code);
  atomicAdd(&counts[2], bad_narrow);
}
)";

// The block quantizers with their E2M1 codes taken by pairs, as on sm_100a and later
// (NVFP4_E2M1_BY_PAIRS), here with the conversion's definition in the instruction's place.
const char* kByPairsProbe = R"(
#define NVFP4_E2M1_BY_PAIRS 1
#include "common/nvfp4_quantize.cuh"
extern "C" __global__ void probe(const unsigned* words, const float* gscales, int n_g, int blocks, unsigned* out) {
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= blocks) return;
  unsigned w[8], packed[2];
  float x[16];
  for (int i = 0; i < 8; ++i) {
    w[i] = words[8 * b + i];
    x[2 * i] = __uint_as_float(w[i] << 16), x[2 * i + 1] = __uint_as_float(w[i] & 0xFFFF0000u);
  }
  const float g = gscales[b % n_g];
  out[6 * b] = nvfp4k::quantize_block16_16bit<nvfp4k::DTYPE_BF16>(w, g, packed);
  out[6 * b + 1] = packed[0], out[6 * b + 2] = packed[1];
  out[6 * b + 3] = nvfp4k::quantize_block16(x, g, packed);
  out[6 * b + 4] = packed[0], out[6 * b + 5] = packed[1];
}
)";

// The GPU's E4M3 conversion against its definition on every s >= 0 (Inf and NaN among them):
// the codes, and the decoded values' bits (any NaN for the NaN code).
const char* kE4m3Probe = R"(
#include "common/nvfp4_quantize.cuh"
extern "C" __global__ void probe(unsigned long long* counts) {
  const unsigned long long bits = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;  // 0 .. 2^31 - 1
  float got_value, want_value;
  const unsigned got = nvfp4k::e4m3_round_satfinite(__uint_as_float(unsigned(bits)), got_value);
  const unsigned want = nvfp4k::e4m3_round_satfinite_definition(__uint_as_float(unsigned(bits)), want_value);
  const bool same_value = __float_as_uint(got_value) == __float_as_uint(want_value) || (got_value != got_value && want_value != want_value);
  if (got != want || !same_value) atomicAdd(&counts[0], 1ull);
  if (bits == 0x3F800000u && got == 0x38u && got_value == 1.0f) atomicAdd(&counts[1], 1ull);  // the probe ran: 1 is code 0x38
}
)";

}  // namespace

TEST_SUITE("gpu_format") {
  TEST_CASE("the GPU's E4M3 conversion equals its definition on every non-negative float, Inf and NaN") {
    const auto counts = run_counting_probe(kE4m3Probe, 0x80000000u);
    CHECK(counts[0] == 0);
    CHECK(counts[1] == 1);
  }

  TEST_CASE("the quantizers' E2M1 codes by pairs (sm_100a's path, its conversion's definition here) equal the CPU reference") {
    std::mt19937 rng(std::random_device{}());
    const std::vector<float> gscales = {1.0f, 0.37f, 1.0f / 2688, 3.3e-5f};
    constexpr int kBlocks = 1 << 16;
    std::vector<uint8_t> bytes;  // BF16 blocks, adversarial ones (ties, zeros, subnormal and saturated scales, NaN, Inf) among them
    for (float gs : gscales) {
      const auto part = testutil::quantize_input(kBlocks / 4 / 64, 64 * 16, 64 * 16, nvfp4::jit::DType::bf16, rng, true, gs);
      bytes.insert(bytes.end(), part.begin(), part.end());
    }
    // block b is quantized with gscales[b % 4]: the parts' blocks are interleaved to match
    std::vector<unsigned> words(size_t(kBlocks) * 8);
    for (int b = 0; b < kBlocks; ++b) std::memcpy(&words[size_t(b) * 8], &bytes[(size_t(b % 4) * (kBlocks / 4) + b / 4) * 32], 32);
    DeviceBuffer w = to_device(words), g = to_device(gscales), out(size_t(kBlocks) * 6 * sizeof(unsigned));
    out.fill(0xA5);
    run_probe(load_probe(kByPairsProbe), kBlocks, w.as<unsigned>(), g.as<float>(), int(gscales.size()), kBlocks, out.as<unsigned>());
    std::vector<unsigned> got(size_t(kBlocks) * 6);
    out.download(got.data(), got.size() * sizeof(unsigned));
    int wrong = 0;
    std::string first;
    for (int b = 0; b < kBlocks; ++b) {
      unsigned wb[8], want[2];
      std::memcpy(wb, &words[size_t(b) * 8], 32);
      const unsigned scale = nvfp4k::quantize_block16_16bit<nvfp4k::DTYPE_BF16>(wb, gscales[b % 4], want);
      for (int path = 0; path < 2; ++path) {  // the 16-bit quantizer, then the fp32 one on the widened values
        const unsigned* d = &got[size_t(b) * 6 + 3 * path];
        if ((d[0] != scale || d[1] != want[0] || d[2] != want[1]) && wrong++ == 0)
          first = fmt::format("block {} (global scale {}, {} quantizer): scale {:#x} nibbles {:08x} {:08x}, want {:#x} {:08x} {:08x}", b,
                              gscales[b % 4], path ? "fp32" : "16-bit", d[0], d[2], d[1], scale, want[1], want[0]);
      }
    }
    CHECK_MESSAGE(wrong == 0, wrong << " blocks differ, the first: " << first);
  }


  TEST_CASE("reciprocal-and-FMA division equals IEEE division on the device") {
    const std::vector<float> gscales = {0.37f, 0.37f * 2, 0.37f * 3, 0.37f * 4, 1.0f / 2688, 3.3e-5f};
    DeviceBuffer g = to_device(gscales), counts(3 * sizeof(unsigned long long));
    counts.fill(0);
    run_probe(load_probe(kProbe), 0x10000, g.as<float>(), int(gscales.size()), counts.as<unsigned long long>());
    unsigned long long got[3];
    counts.download(got, sizeof got);
    CHECK(got[0] == 0);
    CHECK(got[1] == 0);
    CHECK(got[2] == 0);
  }
}
