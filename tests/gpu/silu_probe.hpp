// The exhaustive device test of a 16-bit SwiGLU path (templates/common/silu_bf16.cuh,
// silu_fp16.cuh) against the CPU reference's definition, round_to<DTYPE>(silu_mul(g, u)), on
// the same device: every pair of 16-bit gate and up values, 2^32 of them, in both gate / up
// layouts the kernels use (halves, and GROUP 1: gate and up alternate).
#pragma once
#include <doctest/doctest.h>

#include <string>

#include <fmt/format.h>

#include "probe_kernel.hpp"

// What tells the dtypes apart in the probe: its header and its functions, as macros.
struct SiluDtype {
  const char* name;     // "BF16"
  const char* prelude;  // #include and #define lines, see kSiluProbeBody
  unsigned max_distance;
};

// Thread t takes gate g = t >> 12 and the 16 ups 16 * (t & 4095) + i; counts[0] the outputs
// whose bits differ (any NaN equals any NaN), counts[1] the values that took the exact path,
// counts[2] the first mismatch as g << 16 | u (+1; 0: none), counts[3] the largest distance in
// fp32 bits between the estimate and the exact value where the estimate may decide and the
// exact value is a normal fp32 value.
inline const char* kSiluProbeBody = R"(
extern "C" __global__ void probe(unsigned long long* counts) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x, g = t >> 12, u0 = (t & 4095u) * 16;
  unsigned gates[8], ups[8], interleaved_a[8], interleaved_b[8], w[8], wi[8];
  for (int j = 0; j < 8; ++j) {
    gates[j] = g * 0x10001u;
    ups[j] = (u0 + 2 * j) | (u0 + 2 * j + 1) << 16;
    interleaved_a[j] = g | (u0 + j) << 16;
    interleaved_b[j] = g | (u0 + 8 + j) << 16;
  }
  SILU<16>(gates, ups, w);
  SILU<1>(interleaved_a, interleaved_b, wi);
  unsigned long long bad = 0, exact = 0, first = 0;
  unsigned distance = 0;
  const float gf = TO_FLOAT(g);
  for (int i = 0; i < 16; ++i) {
    const unsigned u = u0 + i;
    const float uf = TO_FLOAT(u);
    const unsigned want = TO_BITS(nvfp4k::silu_mul(gf, uf));
    const bool want_nan = (want & 0x7FFFu) > INF_BITS;
    const unsigned both[2] = {(w[i / 2] >> (i % 2 * 16)) & 0xFFFFu, (wi[i / 2] >> (i % 2 * 16)) & 0xFFFFu};
    for (unsigned got : both) {
      const bool same = want_nan ? (got & 0x7FFFu) > INF_BITS : got == want;
      if (!same) {
        ++bad;
        if (!first) first = (static_cast<unsigned long long>(g) << 16 | u) + 1;
      }
    }
    const float y = nvfp4k::silu_mul_estimate<DTYPE>(gf, uf), c = nvfp4k::silu_mul(gf, uf);
    exact += NEEDS_EXACT(gf, y);
    if (IN_RANGE(gf) && fabsf(c) >= 1.17549435e-38f && fabsf(c) <= 3.4e38f) {
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

// Runs the probe for one dtype and checks every output and the estimate's largest distance.
inline void check_silu_exhaustively(const SiluDtype& d) {
  const std::string source = std::string(d.prelude) + kSiluProbeBody;
  const auto got = run_counting_probe(source.c_str(), 1u << 28);
  MESSAGE(d.name << ": exact path taken for " << got[1] << " of 2^32 pairs (" << double(got[1]) / 4294967296.0 * 100
                 << "%); estimate within " << got[3] << " units of the last place");
  CHECK(got[3] <= d.max_distance);
  CHECK_MESSAGE(got[0] == 0, fmt::format("{}: {} outputs differ, the first at gate bits {:#06x} up bits {:#06x}", d.name,
                                         got[0], (got[2] - 1) >> 16, (got[2] - 1) & 0xFFFF));
}
