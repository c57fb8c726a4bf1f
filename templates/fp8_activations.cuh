// The W4A8 GEMM's activations (sm90/gemm_w4a16.cuh with E4M3 operands): A [rows, K] in BF16 or
// FP16 to E4M3 per row, common/fp8_fold.cuh's activation_e4m3 with the row's scale amax / 448
// (amax: its largest finite |x|), written to row_scales. The columns of every 16 are stored
// permuted for the weight's fragment (sm90/fp8_operand.cuh): byte 4t + i of a 16-byte group
// holds column 2t + i % 2 + 8 (i / 2).
// A grouped GEMM's A: contiguous rows gathered through a row index, or masked groups' rows up
// to their counts (Fp8ActivationParams). One CTA a row: its 16-column groups held in registers
// (GROUPS a thread) while the amax is reduced over the CTA, then converted and stored 16 bytes
// at a time.
#pragma once
#include "common/fp8_fold.cuh"
#include "common/params.cuh"
#include "common/ptx/dependent_launch.cuh"
#include "common/vector_io.cuh"
#include "row_quantize.cuh"

namespace nvfp4k {

template <int ADT, long long K, int THREADS>
__device__ __forceinline__ void fp8_activations(const Fp8ActivationParams& p) {
  static_assert(K % 16 == 0 && THREADS % 32 == 0);
  constexpr long long ROW_GROUPS = K / 16;
  constexpr int GROUPS = int((ROW_GROUPS + THREADS - 1) / THREADS);
  __shared__ float scratch[THREADS / 32];
  // The GEMM reads this kernel's output only after its griddep_wait.
  griddep_launch_dependents();
  const long long row = blockIdx.x;
  if (p.group_rows) {  // a masked group's rows past its count: no row of D reads them
    const long long group = row / p.group_stride;
    if (row - group * p.group_stride >= p.group_rows[group]) return;
  }
  long long source = row;
  if (p.row_index) {
    source = p.row_index[row];
    if (source < 0 || source >= p.a_rows) {
      if (threadIdx.x == 0) p.row_scales[row] = __int_as_float(0x7FC00000);
      return;
    }
  }
  const unsigned char* a = static_cast<const unsigned char*>(p.a) + source * p.a_stride * 2;
  float v[GROUPS][16];
  float amax = 0.0f;
#pragma unroll
  for (int g = 0; g < GROUPS; ++g) {
    const long long group = (long long)g * THREADS + threadIdx.x;
    if (group < ROW_GROUPS) {
      load_as_float<ADT, 16>(a + group * 32, v[g]);
#pragma unroll
      for (int i = 0; i < 16; ++i)
        if (is_finite(v[g][i])) amax = fmaxf(amax, fabsf(v[g][i]));
    }
  }
  amax = cta_reduce<THREADS / 32>(amax, scratch, Max{});
  const float inverse = amax > 0.0f ? div_rn(448.0f, amax) : 1.0f;  // (an IEEE quotient, as the model)
  if (threadIdx.x == 0) p.row_scales[row] = activation_scale(amax);
  unsigned char* out = p.out + row * K;
#pragma unroll
  for (int g = 0; g < GROUPS; ++g) {
    const long long group = (long long)g * THREADS + threadIdx.x;
    if (group >= ROW_GROUPS) break;
    unsigned w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
    for (int i = 0; i < 16; ++i)
      w[i / 4] |= unsigned(activation_e4m3(v[g][fp8_activation_column(i)], inverse)) << (8 * (i % 4));
    *reinterpret_cast<uint4*>(out + group * 16) = make_uint4(w[0], w[1], w[2], w[3]);
  }
}

}  // namespace nvfp4k
