// W4A4 in one launch on Hopper: a producer warp decodes a stage's NVFP4 activations to BF16
// and stores them where TMA would have put BF16 rows (sm90/gemm_w4a16.cuh's activation boxes:
// BM rows of 128 bytes a box, 128-byte swizzle), so the consumers' wgmmas read them as ever.
// Each pair of values is made as the weights' are (common/mma_operand.cuh: a byte placed, times
// its block scale), e2m1 x e4m3 x 2^-SHIFT, exact: dequantize's BF16 times a power of two, which
// the epilogue undoes with the weights' (GemmConfig::SHIFT). Every product and fp32 sum is the
// two-launch path's times that power, so D's bits are its bits. A's global scale stays the
// epilogue's, as on A decoded by a kernel of its own. Dense calls of a few rows only
// (w4a4_runs_one_launch, measured; GemmConfig refuses the others): a grouped call decodes A first.
#pragma once
#include "common/mma_operand.cuh"
#include "common/scale_layout.cuh"
#include "common/tile_scheduler.cuh"
#include "sm90/gemm_params.cuh"

namespace nvfp4k::sm90 {

// One warp's decode of k-tile `kt` of `tile`'s rows into the activation boxes at `boxes`.
// Columns past K are zeros; a row whose block scale is NaN is NaN (as dequantize writes it).
// Rows past the tile's are left as they are: their products reach only D's rows
// past the tile's, which are not stored (so a decode tile of M = 1 decodes one row). Lane l takes 16-byte piece l % (BK/8) of a row (4 packed
// bytes and their block's scale), so a warp's loads of a row are one contiguous span; loads go
// out BATCH rows at a time before any is used. The caller orders the stores for wgmma (fence
// proxy.async) and arrives.
template <class C>
__device__ __forceinline__ void decode_fp4_activations(const GemmParams& p, const ScheduledTile& tile, int kt,
                                                       unsigned char* boxes, int lane) {
  constexpr int PIECES = C::BK / 8;               // 16-byte pieces of a row's BF16 values in a stage
  constexpr int ROWS = 32 / PIECES;               // rows a warp covers per pass (1 or 2)
  constexpr int PASSES = C::BM / ROWS;
  constexpr int BATCH = PASSES < 8 ? PASSES : 8;  // passes whose loads go out together
  static_assert(PIECES <= 32 && C::BM % ROWS == 0 && PASSES % BATCH == 0);
  const int piece = lane % PIECES;
  const long long col = (long long)kt * C::BK + 8 * piece;  // the piece's first column
  const bool in_k = col < C::K;
  const int box = piece / 8, chunk = piece % 8;
  // A scale's offset, split into the lane's k-block part (fixed) and a row's part
  using U = unsigned long long;
  const U kb = U(col) / 16;
  const U scale_col = C::A_SCALES == SCALES_SWIZZLED128X4 ? swizzled128x4_kblock_offset(kb) : kb;
  auto scale_row = [](U r) { return C::A_SCALES == SCALES_SWIZZLED128X4 ? swizzled128x4_row_offset(r, U(C::KB)) : r * C::KB; };
#pragma unroll 1
  for (int pass0 = 0; pass0 < PASSES && tile.m0 + pass0 * ROWS < tile.m_end; pass0 += BATCH) {
    unsigned word[BATCH], scale[BATCH];
#pragma unroll
    for (int j = 0; j < BATCH; ++j) {
      const long long m = tile.m0 + (pass0 + j) * ROWS + lane / PIECES;
      const bool in = m < tile.m_end && in_k;
      const U row = in ? U(m) : 0ull;
      word[j] = in ? __ldg(reinterpret_cast<const unsigned*>(p.a + row * p.a_stride + col / 2)) : 0u;
      scale[j] = in ? __ldg(p.a_scales + scale_row(row) + scale_col) : 0u;
    }
#pragma unroll
    for (int j = 0; j < BATCH; ++j) {
      const int r = (pass0 + j) * ROWS + lane / PIECES;
      if (tile.m0 + r >= tile.m_end) continue;
      using Op = Fp4Operand<DTYPE_BF16>;
      const unsigned scales = Op::scale_pairs(scale[j], false);  // lane 0: the block scale x 2^(BIAS - SHIFT)
      const bool nan = (scale[j] & 0x7Fu) == 0x7Fu;  // the NaN scale
      unsigned pairs[4];
#pragma unroll
      for (int e = 0; e < 4; ++e)
        pairs[e] = nan ? 0x7FFF7FFFu : Op::template scaled<0>(Op::place((word[j] >> (8 * e)) & 0xFFu), scales);
      *reinterpret_cast<uint4*>(boxes + box * C::A_BOX_BYTES + r * 128 + 16 * (chunk ^ (r % 8))) =
          make_uint4(pairs[0], pairs[1], pairs[2], pairs[3]);
    }
  }
}

}  // namespace nvfp4k::sm90
