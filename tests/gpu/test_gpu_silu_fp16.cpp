// SwiGLU's FP16 path as the GPU compiles it (templates/common/silu_fp16.cuh: an estimate from
// the hardware's approximations, the exact path where a bracket around it straddles a rounding
// midpoint and for gates near -88) against round_to<FP16>(silu_mul(g, u)) on every pair of FP16
// values (silu_probe.hpp).
#include "silu_probe.hpp"

#include "common/silu_fp16.cuh"

TEST_SUITE("gpu_silu_fp16") {
  TEST_CASE("the FP16 SwiGLU path equals the exact definition on every gate and up pair") {
    check_silu_exhaustively({"FP16", R"(
#include "common/silu_fp16.cuh"
#define DTYPE nvfp4k::DTYPE_FP16
#define SILU nvfp4k::silu_mul_fp16
#define NEEDS_EXACT nvfp4k::silu_fp16_needs_exact
#define IN_RANGE nvfp4k::silu_fp16_in_range
#define TO_FLOAT(h) nvfp4k::fp16_bits_to_float(h)
#define TO_BITS nvfp4k::float_to_fp16_bits
#define INF_BITS 0x7C00u
)", nvfp4k::kSiluFp16MaxUlps});
  }
}
