// The prepacked NVFP4 weight the sm_90a GEMM reads fastest (`prepack`): values and block
// scales rearranged once so that a consumer thread finds its four k16 steps' operand bits in
// one 16-byte word and its rows' scales in one 8-byte word, places each BF16 pair with a
// shift and an AND, and each pair of scales with a shift and one LOP3 (no multiply).
//
// Layout: rows padded to 128 and k to 256 (zeros: zero values, zero scales); 64-row x 64-k
// chunks of CHUNK_BYTES, row tile major, k chunks of a row tile consecutive (so a stage of
// one warpgroup is one contiguous copy); after the chunks one byte per (padded) row:
// ROW_NAN where the row has a NaN block scale, | ROW_SWIGLU_ORDER where the rows are in the
// SwiGLU gate/up interleave. A kernel makes a row's outputs NaN unless its byte is the order it
// reads (a NaN scale, or a weight prepacked for the other epilogue). Inside a chunk:
//   bytes [0, 2048): 16 per wgmma thread tid (warpgroup lane 0..127), words w0..w3;
//   bytes [2048, 2304): 8 per row pair g = tid / 4: the 4 scale codes (steps 0..3) of row
//   r0, then those of row r1.
// Thread tid's rows are r0 = (tid/32)*16 + (tid%32)/4 and r1 = r0 + 8; with t = tid % 4,
// step s's wgmma A fragment is four pairs: f0 = (r0, k 16s+2t, +1), f1 = (r1, same),
// f2 = (r0, k 16s+2t+8, +9), f3 = (r1, same); each pair is one packed byte of the ModelOpt
// layout. A pair "placed" for BF16 (Fp4Operand<BF16>::place) occupies the bits PAIR_BITS.
// PAIR_BITS does not tile a word with four rotations (brute force: at most three), so:
//   f0, f1, f2 of step s are w_s rotated right by 0, 6, 26;
//   the bits left over in each word (LEFTOVER) hold the f3 pairs: z = w_a's leftovers plus
//   w_b shifted left by 2 outside them ((w0, w1) for steps 0, 1; (w2, w3) for steps 2, 3),
//   and f3 of the even / odd step is z rotated right by 4 / 30.
// Of these (searched for it) only two rotations per two words need a funnel shift: the others
// take no wrapped bit into PAIR_BITS, so they are plain left shifts, which the compiler may
// issue on the FMA pipe (IMAD.SHL) beside the integer pipe's ANDs.
//
// Scale codes: a nonzero E4M3 scale (1 + m/8) * 2^e (subnormals renormalized, e in [-9, 8])
// is stored as (e + 21) << 3 | m, which placed in a BF16 exponent and mantissa under the
// constant top exponent bits reads scale * 2^118 (and, one exponent step up, an FP16
// scale * 2^7): the factors Fp4Operand's placed nibbles need, with no fix-up multiply. A zero
// scale is code 0 and its block's values are stored as zeros (the placed code is then not
// zero but multiplies zeros); a NaN scale is code 0 and sets its row's NaN byte.
#pragma once
#include "common/fp8_fold.cuh"
#include "common/mma_operand.cuh"
#include "common/portable.cuh"
#include "common/scale_layout.cuh"

namespace nvfp4k::prepacked {

constexpr int TILE_ROWS = 64;                            // one consumer warpgroup's rows
constexpr int CHUNK_K = 64;                              // four k16 steps
constexpr int VALUE_BYTES = 2048;                        // 128 threads x 16 bytes
constexpr int SCALE_BYTES = 256;                         // 32 row pairs x 8 bytes
constexpr int CHUNK_BYTES = VALUE_BYTES + SCALE_BYTES;   // 2304, a multiple of 16 (bulk copies)
constexpr unsigned PAIR_BITS = 0x81C081C0u;              // bits 6-8, 15, 22-24, 31
constexpr unsigned LEFTOVER = 0x0C180C18u;               // bits 3, 4, 10, 11 (+16): no f0-f2 pair's
constexpr int Z_SHIFT = 2;

NVFP4_HD long long padded_rows(long long n) { return (n + 127) / 128 * 128; }
NVFP4_HD long long padded_k(long long k) { return (k + 255) / 256 * 256; }
NVFP4_HD long long chunks_per_row_tile(long long k) { return padded_k(k) / CHUNK_K; }
// Where the NaN row bytes start, and the whole size.
enum RowByte : unsigned char { ROW_NAN = 1, ROW_SWIGLU_ORDER = 2 };
NVFP4_HD long long nan_rows_offset(long long n, long long k) {
  return padded_rows(n) / TILE_ROWS * chunks_per_row_tile(k) * CHUNK_BYTES;
}
// Where the fold exponent bytes start (after the NaN row bytes), and the whole size.
NVFP4_HD long long fold_exponents_offset(long long n, long long k) { return nan_rows_offset(n, k) + padded_rows(n); }
NVFP4_HD long long bytes(long long n, long long k) { return fold_exponents_offset(n, k) + padded_rows(n); }
// Offset of chunk (row tile, k chunk).
NVFP4_HD long long chunk_offset(long long row_tile, long long k_chunk, long long k) {
  return (row_tile * chunks_per_row_tile(k) + k_chunk) * CHUNK_BYTES;
}

NVFP4_HD unsigned rotr(unsigned x, int r) {
#if defined(__CUDA_ARCH__)
  return __funnelshift_r(x, x, r);
#else
  return r == 0 ? x : (x >> r) | (x << (32 - r));
#endif
}
NVFP4_HD unsigned rotl(unsigned x, int r) { return rotr(x, (32 - r) % 32); }

// Pair f of step s is its word (w_s, or z for f3) rotated right by this.
NVFP4_HD int rotation(int s, int f) { return f == 0 ? 0 : f == 1 ? 6 : f == 2 ? 26 : s % 2 ? 30 : 4; }

// Where thread tid's pair f of step s comes from in the ModelOpt layout: row (0..63 in the
// tile) and packed byte (0..31 in the chunk's 32 bytes per row).
NVFP4_HD int source_row(int tid, int f) { return (tid / 32) * 16 + (tid % 32) / 4 + 8 * (f % 2); }
NVFP4_HD int source_byte(int tid, int s, int f) { return 8 * s + tid % 4 + 4 * (f / 2); }

// The stored row that prepacked row `row` holds: itself, or, for a gate_up weight whose rows are
// stored in `interleave` order (PrepackArgs::swiglu_interleave: 0 gate rows then up rows, g > 0
// groups of g gate rows then g up rows), gate / up row i of the 8-row interleave the SwiGLU
// epilogue reads: prepacked rows 16j..16j+7 are gate rows 8j..8j+7, the next 8 up's.
NVFP4_HD long long stored_row(long long row, long long rows, long long interleave) {
  if (interleave < 0 || row >= rows) return row;
  const long long i = row / 16 * 8 + row % 8, up = row % 16 >= 8 ? 1 : 0;
  if (interleave == 0) return up * (rows / 2) + i;
  return i / interleave * 2 * interleave + up * interleave + i % interleave;
}

// The four words of one thread from its 16 source bytes, bytes[s][f] (the inverse of
// place_pair below).
NVFP4_HD void pack_words(const unsigned char (&bytes)[4][4], unsigned (&w)[4]) {
  using Bf16 = Fp4Operand<DTYPE_BF16>;
  for (int s = 0; s < 4; ++s) w[s] = 0;
  for (int s = 0; s < 4; ++s) {
    for (int f = 0; f < 3; ++f) w[s] |= rotl(Bf16::place(bytes[s][f]), rotation(s, f));
    const unsigned z = rotl(Bf16::place(bytes[s][3]), rotation(s, 3));
    const int a = s / 2 * 2;
    w[a] |= z & LEFTOVER;
    w[a + 1] |= (z & ~LEFTOVER) >> Z_SHIFT;
  }
}

// The z word of steps (a, a + 1) from their words w_a, w_b (w_b's leftovers shifted up by 2
// stay inside the word).
NVFP4_HD unsigned leftover_word(unsigned wa, unsigned wb) { return (wa & LEFTOVER) | ((wb << Z_SHIFT) & ~LEFTOVER); }

// Pair f of step s placed for BF16 (as Fp4Operand<BF16>::place of its byte), from the
// step's word and its z word. Rotations right by more than 16 are left shifts here: no bit
// they would wrap around lands in PAIR_BITS.
NVFP4_HD unsigned place_pair(unsigned ws, unsigned z, int s, int f) {
  const unsigned x = f < 3 ? ws : z;
  const int r = rotation(s, f);
  return (r == 0 ? x : r > 16 ? x << (32 - r) : rotr(x, r)) & PAIR_BITS;
}

// A scale's code (see the top); `has_nan` is set for the E4M3 NaN.
NVFP4_HD unsigned char scale_code(unsigned char e4m3, bool& has_nan) {
  int m = e4m3 & 0x7F;
  has_nan = has_nan || m == 0x7F;
  if (m == 0 || m == 0x7F) return 0;
  int e = (m >> 3) - 7;
  m &= 7;
  if (e == -7) {  // subnormal m * 2^-9: normalize
    e = -6;
    while (m < 8) m <<= 1, --e;
    m -= 8;
  }
  return (unsigned char)((e + 21) << 3 | m);
}

#if defined(__CUDA_ARCH__)
// A thread's words of a staged chunk: its 16 value bytes and its row pair's 8 scale-code bytes.
__device__ __forceinline__ void load_chunk(const unsigned char* chunk, int tid, uint4& v, uint2& sc) {
  v = *reinterpret_cast<const uint4*>(chunk + tid * 16);
  sc = *reinterpret_cast<const uint2*>(chunk + VALUE_BYTES + tid / 4 * 8);
}
#endif

// The scale codes of steps 0 and 2 (odd = false) or 1 and 3 of a row's word, as the lanes of a
// 16-bit pair reading scale * 2^(BIAS - SHIFT) of Fp4Operand<DTYPE> (see the top).
template <int DTYPE>
NVFP4_HD unsigned scale_pair(unsigned word, bool odd) {
  // + rather than | for the constant bits (disjoint from the code's): an add may go to the FMA pipe
  if (DTYPE == DTYPE_BF16) return ((odd ? word >> 4 : word << 4) & 0x0FF00FF0u) + 0x70007000u;
  return ((odd ? word >> 1 : word << 7) & 0x7F807F80u) + 0x04000400u;
}

// A BF16-placed pair re-placed for FP16: magnitudes 3 bits up, signs where they are.
NVFP4_HD unsigned bf16_to_fp16_placed(unsigned x) {
  constexpr unsigned TAKE_SHIFTED = 0x0FC00FC0u;  // FP16 magnitude bits 9-11 and BF16's 6-8 (zero after the shift)
  return ((x << 3) & TAKE_SHIFTED) | (x & ~TAKE_SHIFTED);
}

#if defined(__CUDA_ARCH__)
// One chunk's words as a thread decodes them: pair(s, f) is its pair f of k16 step s as exact
// DTYPE values (Fp4Operand<DTYPE>: e2m1 * scale * 2^-SHIFT).
template <int DTYPE>
struct ChunkPairs {
  unsigned w[4], z[2];
  unsigned scales[2][2];  // [row][odd step]: steps 0, 2 / 1, 3 in the lanes
  __device__ __forceinline__ unsigned pair(int s, int f) const {
    unsigned placed = place_pair(w[s], z[s / 2], s, f);
    if constexpr (DTYPE == DTYPE_FP16) placed = bf16_to_fp16_placed(placed);
    const unsigned pair_scales = scales[f % 2][s % 2];
    return s / 2 == 0 ? Fp4Operand<DTYPE>::template scaled<0>(placed, pair_scales)
                      : Fp4Operand<DTYPE>::template scaled<1>(placed, pair_scales);
  }
};

// The chunk loop of every operand the sm_90a GEMM decodes from a prepacked weight: CHUNKS chunks
// from `chunks`, chunk q + 1's words loaded before chunk q is decoded (the wgmma waits are
// memory clobbers, so without this every chunk would start with a shared-memory round trip),
// then emit(q, pairs), each scale pair's exponents raised by scale_bias(h) for row h (0: as
// stored). What emit makes of the pairs (16-bit fragments, or E4M3 ones) and when it issues
// the products is the caller's.
template <int DTYPE, int CHUNKS, class ScaleBias, class Emit>
__device__ __forceinline__ void decode_chunks(const unsigned char* chunks, int tid, ScaleBias&& scale_bias, Emit&& emit) {
  uint4 v_next;
  uint2 sc_next;
  load_chunk(chunks, tid, v_next, sc_next);
#pragma unroll
  for (int q = 0; q < CHUNKS; ++q) {
    const uint4 v = v_next;
    const uint2 sc = sc_next;
    if (q + 1 < CHUNKS) load_chunk(chunks + (q + 1) * CHUNK_BYTES, tid, v_next, sc_next);
    ChunkPairs<DTYPE> pairs{{v.x, v.y, v.z, v.w}, {leftover_word(v.x, v.y), leftover_word(v.z, v.w)}, {}};
    const unsigned row_scales[2] = {sc.x, sc.y};
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      pairs.scales[h][0] = scale_pair<DTYPE>(row_scales[h], false) + scale_bias(h);
      pairs.scales[h][1] = scale_pair<DTYPE>(row_scales[h], true) + scale_bias(h);
    }
    emit(q, pairs);
  }
}
#endif

// The E4M3 scale of (row, block kb) of a weight [rows, k], 0 outside it.
NVFP4_HD unsigned char block_scale(const unsigned char* scales, int layout, long long rows, long long k, long long row,
                                   long long kb) {
  const long long kblocks = k / 16;
  if (row >= rows || kb >= kblocks) return 0;
  return scales[layout == SCALES_LINEAR ? scale_offset_linear(row, kb, kblocks) : scale_offset_swizzled128x4(row, kb, kblocks)];
}

// One thread's share of prepacking chunk (row_tile, k_chunk) of a ModelOpt weight [rows, k]
// (packed bytes `stride` apart per row, scales in `layout`, rows in stored_row's `interleave`
// order): its 16 value bytes and, for every fourth thread, its row pair's 8 scale bytes. The
// GPU kernel and the CPU reference both run this, so their bits agree.
NVFP4_HD void prepack_thread(const unsigned char* packed, long long stride, const unsigned char* scales, int layout,
                             long long rows, long long k, long long row_tile, long long k_chunk, int tid,
                             unsigned char* out, long long interleave) {
  const long long kbytes = k / 2;
  unsigned char src[4][4];
  for (int s = 0; s < 4; ++s)
    for (int f = 0; f < 4; ++f) {
      const long long row = stored_row(row_tile * TILE_ROWS + source_row(tid, f), rows, interleave),
                      byte = k_chunk * 32 + source_byte(tid, s, f);
      const bool zero_block = (block_scale(scales, layout, rows, k, row, k_chunk * 4 + s) & 0x7F) == 0;
      src[s][f] = row < rows && byte < kbytes && !zero_block ? packed[row * stride + byte] : 0;
    }
  unsigned w[4];
  pack_words(src, w);
  unsigned char* chunk = out + chunk_offset(row_tile, k_chunk, k);
  for (int i = 0; i < 4; ++i)
    for (int b = 0; b < 4; ++b) chunk[tid * 16 + 4 * i + b] = (unsigned char)(w[i] >> (8 * b));
  if (tid % 4) return;
  for (int h = 0; h < 2; ++h)
    for (int s = 0; s < 4; ++s) {
      const long long row = stored_row(row_tile * TILE_ROWS + source_row(tid, h), rows, interleave), kb = k_chunk * 4 + s;
      bool nan = false;
      chunk[VALUE_BYTES + tid / 4 * 8 + 4 * h + s] = scale_code(block_scale(scales, layout, rows, k, row, kb), nan);
    }
}

// The NaN byte and the fold exponent byte of padded row `row` (one thread per row runs it), both
// its stored row's: the exponent of the row's largest finite block scale (0 for a row of zero or
// NaN scales).
NVFP4_HD void prepack_row_bytes(const unsigned char* scales, int layout, long long rows, long long k, long long row,
                                unsigned char* out, long long interleave) {
  bool nan = false;
  float max_scale = 0.0f;
  const long long source = stored_row(row, rows, interleave);
  for (long long kb = 0; kb < k / 16; ++kb) {
    const unsigned char s = block_scale(scales, layout, rows, k, source, kb);
    scale_code(s, nan);
    const float v = (s & 0x7F) == 0x7F ? 0.0f : e4m3_to_float(s & 0x7F);
    if (v > max_scale) max_scale = v;
  }
  out[nan_rows_offset(rows, k) + row] = (unsigned char)((nan ? ROW_NAN : 0) | (interleave >= 0 ? ROW_SWIGLU_ORDER : 0));
  out[fold_exponents_offset(rows, k) + row] = (unsigned char)(signed char)fold_exponent(max_scale);
}

}  // namespace nvfp4k::prepacked
