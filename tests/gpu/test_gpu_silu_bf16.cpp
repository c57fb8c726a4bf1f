// SwiGLU's BF16 path as the GPU compiles it (templates/common/silu_bf16.cuh: an estimate from
// the hardware's approximations, the exact path near rounding midpoints) against the CPU
// reference's definition, round_to<BF16>(silu_mul(g, u)), on the same device: every pair of
// BF16 gate and up values, 2^32 of them, in both gate / up layouts the kernels use.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include "core/driver.hpp"
#include "core/gpu_util.hpp"
#include "core/launcher.hpp"
#include "probe_kernel.hpp"
#include "common/silu_bf16.cuh"

using namespace nvfp4::jit::detail;

namespace {

// Thread t takes gate g = t >> 12 and the 16 ups 16 * (t & 4095) + i; counts[0] the outputs
// whose bits differ (any NaN equals any NaN), counts[1] the values that took the exact path,
// counts[2] the first mismatch as g << 16 | u (+1; 0: none), counts[3] the largest distance in
// fp32 bits between the estimate and the exact value where the estimate may decide.
const char* kProbe = R"(
#include "common/silu_bf16.cuh"
extern "C" __global__ void probe(unsigned long long* counts) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x, g = t >> 12, u0 = (t & 4095u) * 16;
  unsigned gates[8], ups[8], interleaved_a[8], interleaved_b[8], w[8], wi[8];
  for (int j = 0; j < 8; ++j) {
    gates[j] = g * 0x10001u;
    ups[j] = (u0 + 2 * j) | (u0 + 2 * j + 1) << 16;
  }
  // GROUP 1: gate, up alternate (a holds pairs 0..3 and b pairs 4..7 of 8 g, u pairs per half)
  for (int j = 0; j < 8; ++j) {
    interleaved_a[j] = g | (u0 + j) << 16;
    interleaved_b[j] = g | (u0 + 8 + j) << 16;
  }
  nvfp4k::silu_mul_bf16<16>(gates, ups, w);
  nvfp4k::silu_mul_bf16<1>(interleaved_a, interleaved_b, wi);
  unsigned long long bad = 0, exact = 0, first = 0;
  unsigned distance = 0;
  const float gf = __uint_as_float(g << 16);
  for (int i = 0; i < 16; ++i) {
    const unsigned u = u0 + i;
    const float uf = __uint_as_float(u << 16);
    const unsigned want = nvfp4k::float_to_bf16_bits(nvfp4k::silu_mul(gf, uf));
    const bool want_nan = (want & 0x7FFFu) > 0x7F80u;
    const unsigned both[2] = {(w[i / 2] >> (i % 2 * 16)) & 0xFFFFu, (wi[i / 2] >> (i % 2 * 16)) & 0xFFFFu};
    for (unsigned got : both) {
      const bool same = want_nan ? (got & 0x7FFFu) > 0x7F80u : got == want;
      if (!same) {
        ++bad;
        if (!first) first = (static_cast<unsigned long long>(g) << 16 | u) + 1;
      }
    }
    const float y = nvfp4k::silu_mul_estimate(gf, uf), c = nvfp4k::silu_mul(gf, uf);
    exact += nvfp4k::silu_bf16_needs_exact(gf, y);
    if (nvfp4k::silu_bf16_in_range(gf) && fabsf(c) <= 3.4e38f) {
      const int dy = int(__float_as_uint(y) & 0x7FFFFFFFu), dc = int(__float_as_uint(c) & 0x7FFFFFFFu);
      distance = max(distance, unsigned(dy > dc ? dy - dc : dc - dy));
    }
  }
  atomicMax(&counts[3], (unsigned long long)distance);
  atomicAdd(&counts[0], bad);
  atomicAdd(&counts[1], exact);
  if (first) atomicCAS(&counts[2], 0ull, first);
}
)";

}  // namespace

TEST_SUITE("gpu_silu_bf16") {
  TEST_CASE("the BF16 SwiGLU path equals the exact definition on every gate and up pair") {
    const auto got = run_counting_probe(kProbe, 1u << 28);
    MESSAGE("exact path taken for " << got[1] << " of 2^32 pairs (" << double(got[1]) / 4294967296.0 * 100
                                    << "%); estimate within " << got[3] << " units of the last place");
    CHECK(got[3] < nvfp4k::kSiluBf16Window);
    CHECK_MESSAGE(got[0] == 0, fmt::format("{} outputs differ, the first at gate bits {:#06x} up bits {:#06x}", got[0],
                                           (got[2] - 1) >> 16, (got[2] - 1) & 0xFFFF));
  }
}
