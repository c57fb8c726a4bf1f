// A grouped W4A16 GEMM's activations in its sorted row order: out row r is A's row row_index[r]
// (moe_route's), so the GEMM that follows loads its rows by TMA like sorted rows. Taller expert
// tiles wait on the producers' 16-byte gathers, while this copy moves the same bytes at the copy
// bandwidth (docs/perf-log.md). An index outside [0, a_rows) gives a NaN row, as the GEMM's own
// gather does. One CTA a row, its 16-byte pieces all loaded before the first is stored.
#pragma once
#include "common/params.cuh"
#include "common/ptx/dependent_launch.cuh"

namespace nvfp4k {

template <int ADT, long long K, int THREADS>
__device__ __forceinline__ void gather_rows(const GatherRowsParams& p) {
  static_assert(K % 8 == 0, "rows of 16-byte pieces");
  constexpr long long PIECES = K / 8;  // 8 16-bit values each
  constexpr int BATCH = 8;             // pieces a thread holds at once (32 registers)
  // The GEMM reads this kernel's output only after its griddep_wait.
  griddep_launch_dependents();
  const long long row = blockIdx.x;
  const long long source = p.row_index[row];
  const bool in = source >= 0 && source < p.a_rows;
  const unsigned nan = ADT == DTYPE_FP16 ? 0x7E007E00u : 0x7FC07FC0u;
  const uint4* src = reinterpret_cast<const uint4*>(static_cast<const unsigned char*>(p.a) + (in ? source : 0) * p.a_stride * 2);
  uint4* out = reinterpret_cast<uint4*>(static_cast<unsigned char*>(p.out) + row * K * 2);
#pragma unroll 1
  for (long long base = 0; base < PIECES; base += (long long)BATCH * THREADS) {
    uint4 v[BATCH];
#pragma unroll
    for (int j = 0; j < BATCH; ++j) {
      const long long c = base + (long long)j * THREADS + threadIdx.x;
      v[j] = make_uint4(nan, nan, nan, nan);
      if (in && c < PIECES) v[j] = __ldg(src + c);
    }
#pragma unroll
    for (int j = 0; j < BATCH; ++j) {
      const long long c = base + (long long)j * THREADS + threadIdx.x;
      if (c < PIECES) out[c] = v[j];
    }
  }
}

}  // namespace nvfp4k
