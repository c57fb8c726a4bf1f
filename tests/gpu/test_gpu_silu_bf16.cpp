// SwiGLU's BF16 path as the GPU compiles it (templates/common/silu_bf16.cuh: an estimate from
// the hardware's approximations, the exact path near rounding midpoints and for gates near -88)
// against round_to<BF16>(silu_mul(g, u)) on every pair of BF16 values (silu_probe.hpp).
#include "silu_probe.hpp"

#include "common/silu_bf16.cuh"

TEST_SUITE("gpu_silu_bf16") {
  TEST_CASE("the BF16 SwiGLU path equals the exact definition on every gate and up pair") {
    check_silu_exhaustively({"BF16", R"(
#include "common/silu_bf16.cuh"
#define DTYPE nvfp4k::DTYPE_BF16
#define SILU nvfp4k::silu_mul_bf16
#define NEEDS_EXACT nvfp4k::silu_bf16_needs_exact
#define IN_RANGE nvfp4k::silu_bf16_in_range
#define TO_FLOAT(h) __uint_as_float((h) << 16)
#define TO_BITS nvfp4k::float_to_bf16_bits
#define INF_BITS 0x7F80u
)", nvfp4k::kSiluBf16Window - 1});
  }
}
