// The W4A8 GEMM's activations (sm90/gemm_w4a16.cuh with E4M3 operands): A [rows, K] to E4M3 per
// row, common/fp8_fold.cuh's activation_e4m3 with the row's scale amax / 448 (amax: its largest
// finite |x|), written to row_scales. The columns of every 16 are stored permuted for the
// weight's fragment (sm90/fp8_operand.cuh): byte 4t + i of a 16-byte group holds column
// 2t + i % 2 + 8 (i / 2).
// A is BF16 / FP16 (fp8_activations), or NVFP4 (fp8_activations_nvfp4): each value decoded
// exactly in fp32 (e2m1 x its E4M3 block scale: at most 6 significant bits), the amax taken
// over the decoded values, and the tensor's, row's or group's global scale multiplied into the
// row scale (one fp32 product, exact for a power of two), not into the values. The E4M3 bytes
// are then those the BF16 path makes of the same values decoded to BF16 (exact there): one E4M3
// rounding of v * (448 / amax). It is exact where that has at most 4 significant bits in E4M3's
// normal range: within a block the values differ by their E2M1 factor only (mantissa 1 or 1.5),
// so a power-of-two row factor leaves all of a block exact when its scale's mantissa is 1, 1.25
// or 1.5; but 448 / amax is a power of two only for amax = 1.75 * 2^i, and a quantizer's
// amax = 6 s brings a factor 1/3, which rounds most values (docs/formats.md, "W4A8").
// A grouped GEMM's A: contiguous rows gathered through a row index, or masked groups' rows up
// to their counts (Fp8ActivationParams). One CTA a row: its 16-column groups held in registers
// (GROUPS a thread) while the amax is reduced over the CTA, then converted and stored 16 bytes
// at a time.
#pragma once
#include "common/fp8_fold.cuh"
#include "common/global_scale.cuh"
#include "common/params.cuh"
#include "common/ptx/dependent_launch.cuh"
#include "common/scale_layout.cuh"
#include "common/vector_io.cuh"
#include "row_quantize.cuh"

namespace nvfp4k {

// The row of A that output row `row` reads, or -1 where the pass writes no values: a masked
// group's row past its count (no row of D reads it), or an index outside A (the row's scale NaN,
// as the exact mode makes its D row NaN).
__device__ __forceinline__ long long fp8_activation_source(const Fp8ActivationParams& p, long long row) {
  if (p.group_rows) {
    const long long group = row / p.group_stride;
    if (row - group * p.group_stride >= p.group_rows[group]) return -1;
  }
  if (!p.row_index) return row;
  const long long source = p.row_index[row];
  if (source < 0 || source >= p.a_rows) {
    if (threadIdx.x == 0) p.row_scales[row] = __int_as_float(0x7FC00000);
    return -1;
  }
  return source;
}

// 16 values of a row as E4M3 (activation_e4m3 of x * inverse), in the fragment's column order.
__device__ __forceinline__ void store_fp8_group(unsigned char* out, const float (&v)[16], float inverse) {
  unsigned w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
  for (int i = 0; i < 16; ++i)
    w[i / 4] |= unsigned(activation_e4m3(v[fp8_activation_column(i)], inverse)) << (8 * (i % 4));
  *reinterpret_cast<uint4*>(out) = make_uint4(w[0], w[1], w[2], w[3]);
}

// NVFP4 A's global scale for output row `row` (read by one thread).
__device__ __forceinline__ float fp8_activation_gscale(const Fp8ActivationParams& p, long long row) {
  if (p.gscale_mode != GSCALE_DEVICE_PER_GROUP) return global_scale(p.gscale_mode, p.gscale_value, p.gscale_ptr, row);
  if (p.group_rows) return p.gscale_ptr[row / p.group_stride];
  long long lo = 0, hi = p.groups;  // contiguous: the first group whose end is past the row
  while (lo < hi) {
    const long long mid = (lo + hi) / 2;
    if (p.group_ends[mid] > row) hi = mid;
    else lo = mid + 1;
  }
  return lo < p.groups ? p.gscale_ptr[lo] : 1.0f;  // (past the last group: no row of D reads it)
}

// A thread's 16-column groups of one row of 16-bit A, held as floats.
template <int ADT, int GROUPS>
struct Fp8HeldRow16 {
  static constexpr bool GLOBAL_SCALE = false;
  float v[GROUPS][16];
  __device__ __forceinline__ void load(const Fp8ActivationParams& p, long long source, int g, long long group, long long) {
    load_as_float<ADT, 16>(static_cast<const unsigned char*>(p.a) + (source * p.a_stride + group * 16) * 2, v[g]);
  }
  __device__ __forceinline__ void values(int g, float (&x)[16]) const {
#pragma unroll
    for (int i = 0; i < 16; ++i) x[i] = v[g][i];
  }
};

// The same of NVFP4 A: the packed words and scales (3 registers a group against 16 floats),
// decoded for the amax and again for the conversion, each value e2m1 x scale in fp32 (exact).
template <int SCALE_LAYOUT, int GROUPS>
struct Fp8HeldRowNvfp4 {
  static constexpr bool GLOBAL_SCALE = true;
  unsigned packed[GROUPS][2];
  float scale[GROUPS];
  __device__ __forceinline__ void load(const Fp8ActivationParams& p, long long source, int g, long long group,
                                       long long row_groups) {
    // (rows are 4-byte aligned: two words)
    const unsigned char* a = static_cast<const unsigned char*>(p.a) + source * p.a_stride + group * 8;
    packed[g][0] = *reinterpret_cast<const unsigned*>(a);
    packed[g][1] = *reinterpret_cast<const unsigned*>(a + 4);
    scale[g] = e4m3_to_float(p.a_scales[scale_offset<SCALE_LAYOUT>(source, group, row_groups)]);
  }
  __device__ __forceinline__ void values(int g, float (&x)[16]) const {
#pragma unroll
    for (int i = 0; i < 16; ++i) x[i] = e2m1_to_float((packed[g][i / 8] >> (4 * (i % 8))) & 15u) * scale[g];
  }
};

NVFP4_HD constexpr int fp8_groups(long long k, int threads) { return int((k / 16 + threads - 1) / threads); }

// One row a CTA, its groups held in `Row` (all loads out before the first is used); with
// Row::GLOBAL_SCALE, NVFP4 A's global scale multiplied into the row scale.
template <class Row, long long K, int THREADS>
__device__ __forceinline__ void fp8_activation_row(const Fp8ActivationParams& p) {
  static_assert(K % 16 == 0 && THREADS % 32 == 0);
  constexpr long long ROW_GROUPS = K / 16;
  constexpr int GROUPS = fp8_groups(K, THREADS);
  __shared__ float scratch[THREADS / 32];
  // The GEMM reads this kernel's output only after its griddep_wait.
  griddep_launch_dependents();
  const long long row = blockIdx.x;
  const long long source = fp8_activation_source(p, row);
  if (source < 0) return;
  Row held;
#pragma unroll
  for (int g = 0; g < GROUPS; ++g) {
    const long long group = (long long)g * THREADS + threadIdx.x;
    if (group < ROW_GROUPS) held.load(p, source, g, group, ROW_GROUPS);
  }
  float amax = 0.0f;
#pragma unroll
  for (int g = 0; g < GROUPS; ++g) {
    const long long group = (long long)g * THREADS + threadIdx.x;
    if (group < ROW_GROUPS) {
      float v[16];
      held.values(g, v);
#pragma unroll
      for (int i = 0; i < 16; ++i)
        if (is_finite(v[i])) amax = fmaxf(amax, fabsf(v[i]));
    }
  }
  amax = cta_reduce<THREADS / 32>(amax, scratch, Max{});
  const float inverse = amax > 0.0f ? div_rn(448.0f, amax) : 1.0f;  // (an IEEE quotient, as the model)
  if (threadIdx.x == 0)
    p.row_scales[row] = Row::GLOBAL_SCALE ? activation_scale(amax) * fp8_activation_gscale(p, row) : activation_scale(amax);
  unsigned char* out = p.out + row * K;
#pragma unroll
  for (int g = 0; g < GROUPS; ++g) {
    const long long group = (long long)g * THREADS + threadIdx.x;
    if (group >= ROW_GROUPS) break;
    float v[16];
    held.values(g, v);
    store_fp8_group(out + group * 16, v, inverse);
  }
}

template <int ADT, long long K, int THREADS>
__device__ __forceinline__ void fp8_activations(const Fp8ActivationParams& p) {
  fp8_activation_row<Fp8HeldRow16<ADT, fp8_groups(K, THREADS)>, K, THREADS>(p);
}

template <long long K, int SCALE_LAYOUT, int THREADS>
__device__ __forceinline__ void fp8_activations_nvfp4(const Fp8ActivationParams& p) {
  fp8_activation_row<Fp8HeldRowNvfp4<SCALE_LAYOUT, fp8_groups(K, THREADS)>, K, THREADS>(p);
}

}  // namespace nvfp4k
