// The format helpers as the GPU compiles them, against the plain IEEE formulas on the same
// device: every finite FP16 value x (both signs, both zeros), every finite E4M3 scale s, a few
// global scales g, for both divisions (two FMA corrections, and one as for 16-bit inputs).
#include <doctest/doctest.h>

#include "core/driver.hpp"
#include "core/gpu_util.hpp"
#include "core/launcher.hpp"
#include "core/nvrtc_compiler.hpp"
#include "probe_kernel.hpp"

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

}  // namespace

TEST_SUITE("gpu_format") {
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
