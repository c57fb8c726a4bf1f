// The sm_100a / sm_103a GEMM's tcgen05 encodings checked against an independent statement of
// them, for every candidate tile: the shared memory descriptors of the operands and the scale
// atoms at every stage and MMA step, the instruction descriptor, the tensor memory addresses and
// budget, and the layouts the emulation decodes. The statement below is written from the sources,
// not from templates/sm100 (cited as "ISA" = PTX ISA 9.0, "CUTLASS" = NVIDIA/cutlass at 7107b05):
//   ISA 9.7.16.4.1 Table 40     shared memory descriptor: bits, fixed 0b001 at 46-48, base offset
//   ISA 9.7.16.4.1 Table 41     the 128-byte swizzle's pattern starts on a 1024-byte boundary
//   ISA 9.7.16.4.2 Table 44     instruction descriptor for .kind::mxf4 / .kind::mxf4nvf4
//   ISA 9.7.16.2.1              .kind::mxf4nvf4, dense, K 64: .cta_group::1 M 128, N 8..256 by 8;
//                               .cta_group::2 M 256, N 16..256 by 16 (Table 39)
//   ISA 9.7.16.3.1.1 / 9.7.16.3.2  LBO "not used, assumed to be 1" for swizzled K-major; SBO the
//                               offset from the first 8 rows to the next 8
//   ISA 9.7.16.3.3              canonical layouts, K-major: no swizzle ((8,m),(T,2k)):((1T,SBO),(1,LBO)),
//                               128B Swizzle<3,4,3> o ((8,m),(T,2k)):((8T,SBO),(1,T)), T = 128 / bits
//   ISA 9.7.16.1 / 9.7.16.1.1 / 9.7.16.1.2 / 9.7.16.7.1  tensor memory: 128 lanes x 512 columns,
//                               lane in bits 31-16, column in 15-0; alloc a power of 2 in [32, 512]
//   ISA 9.7.16.9.2              tcgen05.cp .32x128b needs .warpx4 (copied to all 4 warps' lanes)
//   ISA 9.7.16.10.7.2.3 / .3.3  scale_vec::4X: scale factor A / B ids must be 0
//   CUTLASS include/cute/arch/mma_sm100_desc.hpp:101-126 union SmemDescriptor (version_ = 1 at
//     bits 46-47, :746; lbo_mode_ 0, :747; base_offset_ 0, :757; LayoutType SWIZZLE_128B = 2, :82-88),
//     :800-832 make_umma_desc<K>: SBO = stride of the 8-row groups, LBO = 1 (16 bytes) when swizzled,
//     :445-472 union InstrDescriptorBlockScaled (m_dim_ = M >> 4 at bits 24-28, :574),
//     :202-204 MXF4Format::E2M1 = 1, :219-222 ScaleFormat::UE4M3 = 0, :606-609 scale ids from
//     the TMEM address bits 30-31 (0 for a column address)
//   CUTLASS include/cute/swizzle.hpp:54-79 Swizzle<B,M,S>::apply(x) = x ^ ((x & yyy_msk) >> S),
//     include/cute/pointer_swizzle.hpp:86-93 applied to the byte address of a shared memory pointer
//   CUTLASS include/cute/atom/copy_traits_sm90_tma_swizzle.hpp:50-55, 81-84: Swizzle<3,4,3> is
//     TMA's SWIZZLE_128B with 16-byte base; i.e. TMA writes 16-byte chunk c of box row r (rows of
//     128 bytes, 1024-byte aligned destination) at chunk c ^ (r % 8) of that row
//   CUTLASS include/cutlass/detail/sm100_blockscaled_layout.hpp:48-59 Sm1xxBlockScaledBasicChunk
//     SfKMajorAtom ((32,4),(16,4)):((16,4),(0,1)); :121-146 one MMA of K 64 (4 block scales)
//     uses one 512-byte atom per 128 rows
//   CUTLASS include/cute/atom/mma_traits_sm100_frag.hpp:465-480 tmem_sf_frg: scale (mn, sf) at
//     lane mn % 32 (+ 32 per replica, 4 replicas), byte sf of column mn / 32
//   CUTLASS include/cute/atom/mma_traits_sm100.hpp MMA_Traits<SM100_MMA_MXF4_2x1SM_SS>: a pair's
//     ALayout (2,(M/2,K)):(M/2,(1,M)), BLayout (2,(N/2,K)):(N/2,(1,N)), CLayout (2,(M/2,N)):
//     CTA v holds A's and D's rows [128 v, 128 v + 128) and B's [v N/2, (v + 1) N/2); the
//     collective's SF_B tile is round_up(N, 128) columns in each CTA (MMA_ScaleFactor
//     SM100_MMA_MXF4_SS<M/2, round_up(N, 128)>, a one-CTA shape: each CTA's scales as M 128's)
//   CUTLASS include/cute/atom/copy_traits_sm100.hpp:3757-3775 UTCCP 4x32dp128bit: 32 lanes x 128
//     bits, broadcast to the 4 sub-partitions (32 lanes apart)
// What the kernel computes inline (gemm_w4a4.cuh: the A_AT / W_AT / SA_AT / SW_AT offsets, the
// scale word's place in an atom, the tensor memory columns of each copy and MMA) is restated here
// from gemm_w4a4.cuh, since that header builds only under NVRTC; the stage size is checked
// against sm100/gemm_tile.cuh's.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/scale_layout.cuh"
#include "ops/gemm/m_buckets.hpp"
#include "ops/gemm/sm100/tiles.hpp"
#include "sm100/descriptors.cuh"
#include "sm100/gemm_tile.cuh"
#include "sm100/tcgen05_emulated.cuh"

namespace {

namespace backend = nvfp4k::sm100;
using nvfp4::jit::detail::sm100::Tile;

// ---- the independent statement -------------------------------------------------------------

uint64_t bits(uint64_t word, int lo, int width) { return word >> lo & ((uint64_t(1) << width) - 1); }

// Places `value` at [lo, lo + width); a value that does not fit is a statement error.
uint64_t put(uint64_t value, int lo, int width) {
  if (value >= (uint64_t(1) << width)) FAIL("value " << value << " does not fit " << width << " bits");
  return value << lo;
}

// ISA Table 40 (CUTLASS SmemDescriptor): every bit of the 64 belongs to one field.
struct SmemDesc {
  uint64_t start_enc = 0;     // 0-13   matrix-descriptor-encode(start address)
  uint64_t zero_14_15 = 0;    // 14-15  (CUTLASS: unused)
  uint64_t lbo_enc = 0;       // 16-29  matrix-descriptor-encode(leading dimension byte offset)
  uint64_t zero_30_31 = 0;    // 30-31  (CUTLASS: unused)
  uint64_t sbo_enc = 0;       // 32-45  matrix-descriptor-encode(stride dimension byte offset)
  uint64_t fixed_46_48 = 0;   // 46-48  0b001 (CUTLASS: version_ = 1 in 46-47, 48 unused)
  uint64_t base_offset = 0;   // 49-51
  uint64_t lbo_mode = 0;      // 52     0: relative offset, 1: absolute address (sm_103a)
  uint64_t fixed_53_60 = 0;   // 53-60  zero
  uint64_t swizzle = 0;       // 61-63  0 none, 1 128B with 32B atoms, 2 128B, 4 64B, 6 32B
};

uint64_t descriptor_encode(uint64_t x) { return (x & 0x3FFFF) >> 4; }  // ISA, under Table 40

uint64_t encode(const SmemDesc& d) {
  return put(d.start_enc, 0, 14) | put(d.zero_14_15, 14, 2) | put(d.lbo_enc, 16, 14) | put(d.zero_30_31, 30, 2) |
         put(d.sbo_enc, 32, 14) | put(d.fixed_46_48, 46, 3) | put(d.base_offset, 49, 3) | put(d.lbo_mode, 52, 1) |
         put(d.fixed_53_60, 53, 8) | put(d.swizzle, 61, 3);
}

SmemDesc decode_smem(uint64_t w) {
  return {bits(w, 0, 14), bits(w, 14, 2),  bits(w, 16, 14), bits(w, 30, 2), bits(w, 32, 14),
          bits(w, 46, 3), bits(w, 49, 3), bits(w, 52, 1),  bits(w, 53, 8), bits(w, 61, 3)};
}

constexpr uint64_t kSwizzleNone = 0, kSwizzle128B = 2;  // ISA Table 40 bits 61-63; CUTLASS LayoutType

// A K-major operand whose rows are 128 bytes (one 128-byte swizzle atom wide) as TMA writes them
// into a 1024-byte aligned buffer `pattern_start`, seen by an MMA whose K begins `k_byte` bytes
// into the row: the start address moves, the pattern does not (ISA Table 41: base offset from
// the pattern's start; CUTLASS advances only the start, mma_sm100_desc.hpp:863-873).
SmemDesc expected_operand(uint64_t pattern_start, uint64_t k_byte) {
  SmemDesc d;
  d.start_enc = descriptor_encode(pattern_start + k_byte);
  d.lbo_enc = 1;                              // ISA 9.7.16.3.1.1: swizzled K-major, "assumed to be 1"
  d.sbo_enc = descriptor_encode(8 * 128);     // ISA 9.7.16.3.2: 8 rows of 128 bytes
  d.fixed_46_48 = 1;
  d.base_offset = (pattern_start >> 7) & 7;   // ISA, under Table 41
  d.lbo_mode = 0;
  d.swizzle = kSwizzle128B;
  return d;
}

// The source of a tcgen05.cp .32x128b: 32 rows of 16 bytes, 8-row groups 128 bytes apart, no
// swizzle: the SfKMajorAtom's rows. One 128-bit column, so the copy never reads the leading
// offset; CUTLASS's make_umma_desc<K> encodes it as 1 there (see kCutlassWords).
SmemDesc expected_scale_copy(uint64_t atom_address) {
  SmemDesc d;
  d.start_enc = descriptor_encode(atom_address);
  d.lbo_enc = 1;
  d.sbo_enc = descriptor_encode(8 * 16);
  d.fixed_46_48 = 1;
  d.swizzle = kSwizzleNone;
  return d;
}

// ISA Table 44 (.kind::mxf4nvf4 column); CUTLASS InstrDescriptorBlockScaled names in comments.
struct InstrDesc {
  uint64_t sparse_id2 = 0;   // 0-1   reserved (sparse_id2_)
  uint64_t sparse = 0;       // 2     dense 0
  uint64_t reserved_3 = 0;   // 3
  uint64_t b_sf_id = 0;      // 4-5
  uint64_t reserved_6 = 0;   // 6
  uint64_t a_type = 0;       // 7-9   E2M1 = 1
  uint64_t b_type = 0;       // 10-11 E2M1 = 1
  uint64_t reserved_12 = 0;  // 12    (CUTLASS: b_format_'s third bit)
  uint64_t negate_a = 0;     // 13
  uint64_t negate_b = 0;     // 14
  uint64_t transpose_a = 0;  // 15    K-major 0 (a_major_)
  uint64_t transpose_b = 0;  // 16
  uint64_t n_enc = 0;        // 17-22 N >> 3
  uint64_t scale_type = 0;   // 23    UE4M3 = 0 (mxf4nvf4), UE8M0 = 1
  uint64_t reserved_24 = 0;  // 24-26
  uint64_t m_enc = 0;        // 27-28 M >> 7
  uint64_t a_sf_id = 0;      // 29-30
  uint64_t k_dim = 0;        // 31    dense K 64 = 0, K 96 = 1
};

uint64_t encode(const InstrDesc& d) {
  return put(d.sparse_id2, 0, 2) | put(d.sparse, 2, 1) | put(d.reserved_3, 3, 1) | put(d.b_sf_id, 4, 2) |
         put(d.reserved_6, 6, 1) | put(d.a_type, 7, 3) | put(d.b_type, 10, 2) | put(d.reserved_12, 12, 1) |
         put(d.negate_a, 13, 1) | put(d.negate_b, 14, 1) | put(d.transpose_a, 15, 1) | put(d.transpose_b, 16, 1) |
         put(d.n_enc, 17, 6) | put(d.scale_type, 23, 1) | put(d.reserved_24, 24, 3) | put(d.m_enc, 27, 2) |
         put(d.a_sf_id, 29, 2) | put(d.k_dim, 31, 1);
}

InstrDesc decode_instr(uint64_t w) {
  return {bits(w, 0, 2),  bits(w, 2, 1),  bits(w, 3, 1),  bits(w, 4, 2),  bits(w, 6, 1),  bits(w, 7, 3),
          bits(w, 10, 2), bits(w, 12, 1), bits(w, 13, 1), bits(w, 14, 1), bits(w, 15, 1), bits(w, 16, 1),
          bits(w, 17, 6), bits(w, 23, 1), bits(w, 24, 3), bits(w, 27, 2), bits(w, 29, 2), bits(w, 31, 1)};
}

InstrDesc expected_instr(int m, int n) {
  InstrDesc d;
  d.a_type = 1;
  d.b_type = 1;
  d.n_enc = uint64_t(n) >> 3;
  d.scale_type = 0;
  d.m_enc = uint64_t(m) >> 7;
  return d;
}

// CUTLASS's spelling of the same word (InstrDescriptorBlockScaled, make_instr_desc_block_scaled):
// m_dim_ = M >> 4 in bits 24-28, a 3-bit b_format_ at 10-12.
uint64_t cutlass_instr(int m, int n) {
  return put(1, 7, 3) | put(1, 10, 3) | put(uint64_t(n) >> 3, 17, 6) | put(0, 23, 1) | put(uint64_t(m) >> 4, 24, 5);
}

// The words CUTLASS itself builds, from cute compiled on the host (g++ -std=c++17 with CUTLASS's
// include/ and CUDA's include/cccl; on the host cast_smem_ptr_to_uint gives start address 0):
//   UMMA::make_umma_desc<UMMA::Major::K>(local_tile(make_tensor(make_smem_ptr((uint8_t*)0),
//       tile_to_shape(UMMA::Layout_K_SW128_Atom<uint8_t>{}, Shape<_128,_128>{})), Shape<_128,_32>{}, (0, step)))
//     for step 0..3: lbo 1, sbo 64, version 1, base 0, lbo_mode 0, layout 2;
//   make_umma_desc<K> of the .32x128b source, bytes (32,16):(16,1) or (32,(4,4)):(16,(4,1)):
//     lbo 1, sbo 8, version 1, base 0, lbo_mode 0, layout 0;
//   make_instr_desc_block_scaled<float_e2m1_t, float_e2m1_t, float, float_ue4m3_t, 128, N, K, K>().
struct CutlassWords {
  uint64_t operand_at_0 = 0x4000404000010000ull, scale_copy_at_0 = 0x0000400800010000ull;
  uint32_t instr_n64 = 0x08100480u, instr_n128 = 0x08200480u, instr_n256 = 0x08400480u;
} constexpr kCutlassWords;

// ISA 9.7.16.1.1
uint32_t tmem_address(uint32_t lane, uint32_t column) { return lane << 16 | column; }

// A CuTe layout mode: its sub-modes (shape, stride), a coordinate split colexicographically.
using Mode = std::vector<std::pair<long, long>>;
long evaluate(const Mode& mode, long coordinate) {
  long offset = 0;
  for (const auto& [shape, stride] : mode) {
    offset += coordinate % shape * stride;
    coordinate /= shape;
  }
  if (coordinate != 0) FAIL("coordinate outside the mode");
  return offset;
}

// cute::Swizzle<B, M, S>::apply
long swizzle(int b, int m, int s, long x) { return x ^ ((x & (((1L << b) - 1) << (m + s))) >> s); }

// ISA 9.7.16.3.3, K-major, 128-byte swizzle: the byte holding element (row, k) of the operand a
// descriptor with start `start` and `sbo` bytes describes. Elements of 4 bits: T = 32 a 16 bytes;
// the layout's offsets are in elements, two to a byte (ISA 9.7.16.10.4.6).
long canonical_k_sw128_byte(long start, long sbo, long row, long k) {
  const long T = 128 / 4;
  const Mode rows{{8, 8 * T}, {1 << 20, 2 * sbo}}, cols{{T, 1}, {1 << 20, T}};
  return swizzle(3, 4, 3, start + (evaluate(rows, row) + evaluate(cols, k)) / 2);
}

// ISA 9.7.16.3.3, K-major, no swizzle, 8-bit elements (T = 16): byte `byte` of row `row`.
long canonical_k_none_byte(long start, long sbo, long lbo, long row, long byte) {
  const long T = 16;
  const Mode rows{{8, T}, {1 << 20, sbo}}, cols{{T, 1}, {1 << 20, lbo}};
  return swizzle(0, 4, 3, start + evaluate(rows, row) + evaluate(cols, byte));
}

// TMA SWIZZLE_128B: a box 128 bytes wide written to the 1024-byte aligned `box`: row r at
// r * 128, its 16-byte chunk c at chunk c ^ (r % 8).
long tma_sw128_byte(long box, long row, long byte_in_row) {
  return box + row * 128 + ((byte_in_row / 16) ^ (row % 8)) * 16 + byte_in_row % 16;
}

// CUTLASS SfKMajorAtom ((32,4),(16,4)):((16,4),(0,1)) at (row, k) of a 128-row, K 64 block.
long sf_atom_offset(long row, long k) {
  return evaluate({{32, 16}, {4, 4}}, row) + evaluate({{16, 0}, {4, 1}}, k);
}

// CUTLASS tmem_sf_frg: scale (mn, sf) of an MMA with mn rows, replica `rep`: (lane, byte column),
// the byte column counted from the MMA's scale address, 4 to a 32-bit column.
std::pair<long, long> tmem_sf_position(long mn, long sf, long rep, long mma_mn) {
  const long i = evaluate({{32, 1}, {mma_mn / 32, 512}}, mn) + rep * 32 + sf * 128;
  return {i % 128, i / 128};
}

// ---- the kernel's layout, restated from gemm_w4a4.cuh / gemm_tile.cuh ----------------------

constexpr int kSteps = 4;           // K 256 a stage, MMAs of K 64
constexpr unsigned kAtom = 512;     // 128 rows x 4 block scales

struct StageLayout {
  unsigned a_at, w_at, sa_at, sw_at, bytes;
  int w_atoms;
};
// a pair's CTA loads half the weight rows, and holds the scales of all of them
StageLayout stage_layout(int bn, int ctas) {
  StageLayout s;
  s.w_atoms = (bn + 127) / 128;
  s.a_at = 0;
  s.w_at = s.a_at + 128 * 128;  // A: 128 rows of 128 bytes
  s.sa_at = s.w_at + unsigned(bn / ctas) * 128;
  s.sw_at = s.sa_at + kSteps * kAtom;
  s.bytes = s.sw_at + kSteps * unsigned(s.w_atoms) * kAtom;
  return s;
}
// the word of row r's 4 block scales inside its atom (gemm_w4a4.cuh, the scale threads)
unsigned kernel_in_atom(int r) { return unsigned((r % 32) * 16 + (r % 128 / 32) * 4); }
// the tensor memory columns (from the allocation's column 0) of stage s's scales
// (after the accumulators: two of BN columns where two fit beside the stages' scales, else one)
int kernel_accumulators(int bn, int stages) { return 2 * bn + stages * backend::gemm_scale_columns(bn) <= 512 ? 2 : 1; }
unsigned kernel_sfa_column(int bn, int stages, int s) {
  return unsigned(kernel_accumulators(bn, stages) * bn + s * backend::gemm_scale_columns(bn));
}
unsigned kernel_sfw_column(int bn, int stages, int s) { return kernel_sfa_column(bn, stages, s) + 4 * kSteps; }

// ---- comparison ------------------------------------------------------------------------------

std::string name_of(const Tile& t) { return nvfp4::jit::detail::sm100::Tiles::describe(t); }

// One field: names the place, the field and both values.
#define CHECK_FIELD(where, field, got, want)                                                              \
  CHECK_MESSAGE((got) == (want), (where) << " field " << field << ": backend " << (got) << ", ISA/CUTLASS " \
                                       << (want))

void check_smem_fields(const std::string& where, uint64_t backend_word, const SmemDesc& want) {
  const SmemDesc got = decode_smem(backend_word);
  CHECK_FIELD(where, "start address (bits 0-13)", got.start_enc, want.start_enc);
  CHECK_FIELD(where, "bits 14-15", got.zero_14_15, want.zero_14_15);
  CHECK_FIELD(where, "leading byte offset (16-29)", got.lbo_enc, want.lbo_enc);
  CHECK_FIELD(where, "bits 30-31", got.zero_30_31, want.zero_30_31);
  CHECK_FIELD(where, "stride byte offset (32-45)", got.sbo_enc, want.sbo_enc);
  CHECK_FIELD(where, "fixed 0b001 / version (46-48)", got.fixed_46_48, want.fixed_46_48);
  CHECK_FIELD(where, "base offset (49-51)", got.base_offset, want.base_offset);
  CHECK_FIELD(where, "leading dimension mode (52)", got.lbo_mode, want.lbo_mode);
  CHECK_FIELD(where, "fixed zero (53-60)", got.fixed_53_60, want.fixed_53_60);
  CHECK_FIELD(where, "swizzle (61-63)", got.swizzle, want.swizzle);
  CHECK_FIELD(where, "the whole word", backend_word, encode(want));
}

std::vector<Tile> every_candidate_tile() {
  std::vector<Tile> tiles;
  for (int sms : {1, 16, 132, 148, 160})
    for (int64_t n : {8, 1000, 4096, 14336, 65536})
      for (int bucket : nvfp4::jit::detail::kGemmMBuckets)
        for (const Tile& t : nvfp4::jit::detail::sm100::Tiles::candidate_tiles(n, bucket, sms))
          if (std::find(tiles.begin(), tiles.end(), t) == tiles.end()) tiles.push_back(t);
  return tiles;
}

// 1024-byte aligned places of the kernel's aligned dynamic shared memory to try
constexpr unsigned kSmemBases[] = {0, 1024, 4096};

}  // namespace

TEST_SUITE("sm100_descriptors") {
  TEST_CASE("the statement: the ISA's and CUTLASS's spellings agree, and a wrong field is seen") {
    // ISA Table 44 (M >> 7 at 27-28) and CUTLASS (M >> 4 at 24-28) give one word for M 128
    // and for a pair's M 256
    for (int n = 8; n <= 256; n += 8) {
      CAPTURE(n);
      CHECK(encode(expected_instr(128, n)) == cutlass_instr(128, n));
      if (n % 16 == 0) CHECK(encode(expected_instr(256, n)) == cutlass_instr(256, n));
    }
    // the 128-byte swizzle as a Swizzle<3,4,3> on byte addresses is TMA's chunk c ^ (r % 8)
    for (long row = 0; row < 64; ++row)
      for (long byte = 0; byte < 128; ++byte) CHECK(swizzle(3, 4, 3, 2048 + row * 128 + byte) == tma_sw128_byte(2048, row, byte));
    // the comparison sees a single wrong bit in any field
    const SmemDesc want = expected_operand(8192, 32);
    for (int bit = 0; bit < 64; ++bit) {
      const uint64_t flipped = encode(want) ^ (uint64_t(1) << bit);
      const SmemDesc got = decode_smem(flipped);
      const bool same = got.start_enc == want.start_enc && got.zero_14_15 == want.zero_14_15 &&
                        got.lbo_enc == want.lbo_enc && got.zero_30_31 == want.zero_30_31 &&
                        got.sbo_enc == want.sbo_enc && got.fixed_46_48 == want.fixed_46_48 &&
                        got.base_offset == want.base_offset && got.lbo_mode == want.lbo_mode &&
                        got.fixed_53_60 == want.fixed_53_60 && got.swizzle == want.swizzle;
      CHECK_MESSAGE(!same, "bit " << bit << " belongs to no field");
      CHECK(encode(decode_smem(flipped)) == flipped);
    }
    for (int bit = 0; bit < 32; ++bit) {
      const uint64_t flipped = encode(expected_instr(128, 256)) ^ (uint64_t(1) << bit);
      CHECK(encode(decode_instr(flipped)) == flipped);
    }
  }

  TEST_CASE("CUTLASS's own words: the statement and the backend agree with them") {
    // start address 0 in both: the host build of cute has no shared window
    CHECK(encode(expected_operand(0, 0)) == kCutlassWords.operand_at_0);
    CHECK(encode(expected_scale_copy(0)) == kCutlassWords.scale_copy_at_0);
    CHECK(backend::operand_descriptor(0, 0) == kCutlassWords.operand_at_0);
    CHECK(backend::scale_descriptor(0) == kCutlassWords.scale_copy_at_0);
    // the start field alone moves with the address (CUTLASS's DescriptorIterator adds to it)
    for (unsigned at : {1024u, 17408u, 230400u})
      for (int step = 0; step < kSteps; ++step)
        CHECK(backend::operand_descriptor(at, step) == (kCutlassWords.operand_at_0 | descriptor_encode(at + 32u * unsigned(step))));
    for (const auto& [n, word] : {std::pair<int, uint32_t>{64, kCutlassWords.instr_n64}, {128, kCutlassWords.instr_n128},
                                  {256, kCutlassWords.instr_n256}}) {
      CAPTURE(n);
      CHECK(encode(expected_instr(128, n)) == word);
      CHECK(backend::instr_descriptor_mxf4nvf4(128, n) == word);
    }
  }

  TEST_CASE("every candidate tile: operand and scale descriptors at every stage and step, field by field") {
    const std::vector<Tile> tiles = every_candidate_tile();
    std::ostringstream list;
    for (const Tile& t : tiles) list << " " << name_of(t);
    MESSAGE(tiles.size() << " candidate tiles:" << list.str());
    REQUIRE(tiles.size() >= 3);
    for (const Tile& t : tiles) {
      const StageLayout L = stage_layout(t.block_n, t.ctas);
      CHECK_MESSAGE(L.bytes == backend::gemm_stage_bytes(t.block_n, t.ctas),
                    name_of(t) << ": stage bytes " << backend::gemm_stage_bytes(t.block_n, t.ctas) << ", restated " << L.bytes);
      CHECK_MESSAGE(L.bytes % 1024 == 0, name_of(t) << ": a stage of " << L.bytes << " bytes breaks the 1024-byte pattern");
      for (unsigned base : kSmemBases) {
        // the highest byte a descriptor names stays within its 18 address bits
        CHECK(base + unsigned(t.stages) * L.bytes <= (1u << 18));
        for (int s = 0; s < t.stages; ++s) {
          const unsigned stage = base + unsigned(s) * L.bytes;
          for (const auto& [name, tile_at] : {std::pair<const char*, unsigned>{"A", L.a_at}, {"W", L.w_at}}) {
            CHECK_MESSAGE((stage + tile_at) % 1024 == 0, name_of(t) << " stage " << s << " " << name << " tile at "
                                                                     << stage + tile_at << ": not 1024-byte aligned");
            for (int step = 0; step < kSteps; ++step) {
              std::ostringstream where;
              where << name_of(t) << " smem base " << base << " stage " << s << " step " << step << " " << name
                    << " operand";
              check_smem_fields(where.str(), backend::operand_descriptor(stage + tile_at, step),
                                expected_operand(stage + tile_at, 32u * unsigned(step)));
            }
          }
          for (int step = 0; step < kSteps; ++step) {
            std::ostringstream where;
            where << name_of(t) << " smem base " << base << " stage " << s << " step " << step;
            const unsigned sa = stage + L.sa_at + unsigned(step) * kAtom;
            check_smem_fields(where.str() + " A scale atom", backend::scale_descriptor(sa), expected_scale_copy(sa));
            for (int a = 0; a < L.w_atoms; ++a) {
              const unsigned sw = stage + L.sw_at + unsigned(step * L.w_atoms + a) * kAtom;
              check_smem_fields(where.str() + " W scale atom " + std::to_string(a), backend::scale_descriptor(sw),
                                expected_scale_copy(sw));
            }
          }
        }
      }
    }
  }

  TEST_CASE("every candidate tile: the instruction descriptor, tensor memory addresses and budget") {
    for (const Tile& t : every_candidate_tile()) {
      const std::string where = name_of(t) + " instruction descriptor";
      // ISA 9.7.16.2.1: the shape exists (M 128 a CTA: a pair's MMA is M 256)
      const int m = 128 * t.ctas;
      CHECK((t.ctas == 1 || t.ctas == 2));
      CHECK(t.block_n % (8 * t.ctas) == 0);
      CHECK(t.block_n >= 8 * t.ctas);
      CHECK(t.block_n <= 256);
      const uint64_t word = backend::instr_descriptor_mxf4nvf4(m, t.block_n);
      const InstrDesc got = decode_instr(word), want = expected_instr(m, t.block_n);
      CHECK_FIELD(where, "sparsity selector (0-1)", got.sparse_id2, want.sparse_id2);
      CHECK_FIELD(where, "sparsity (2)", got.sparse, want.sparse);
      CHECK_FIELD(where, "reserved (3)", got.reserved_3, want.reserved_3);
      CHECK_FIELD(where, "B scale factor id (4-5)", got.b_sf_id, want.b_sf_id);
      CHECK_FIELD(where, "reserved (6)", got.reserved_6, want.reserved_6);
      CHECK_FIELD(where, "atype (7-9)", got.a_type, want.a_type);
      CHECK_FIELD(where, "btype (10-11)", got.b_type, want.b_type);
      CHECK_FIELD(where, "reserved (12)", got.reserved_12, want.reserved_12);
      CHECK_FIELD(where, "negate A (13)", got.negate_a, want.negate_a);
      CHECK_FIELD(where, "negate B (14)", got.negate_b, want.negate_b);
      CHECK_FIELD(where, "transpose A (15)", got.transpose_a, want.transpose_a);
      CHECK_FIELD(where, "transpose B (16)", got.transpose_b, want.transpose_b);
      CHECK_FIELD(where, "N >> 3 (17-22)", got.n_enc, want.n_enc);
      CHECK_FIELD(where, "scale type (23)", got.scale_type, want.scale_type);
      CHECK_FIELD(where, "reserved (24-26)", got.reserved_24, want.reserved_24);
      CHECK_FIELD(where, "M >> 7 (27-28)", got.m_enc, want.m_enc);
      CHECK_FIELD(where, "A scale factor id (29-30)", got.a_sf_id, want.a_sf_id);
      CHECK_FIELD(where, "K dimension (31)", got.k_dim, want.k_dim);
      CHECK_FIELD(where, "the whole word (CUTLASS's spelling)", word, cutlass_instr(m, t.block_n));

      // ISA 9.7.16.1.1: lane << 16 | column, both ways
      for (uint32_t lane : {0u, 32u, 64u, 96u, 127u})
        for (uint32_t column : {0u, 1u, 255u, 511u}) {
          CHECK(backend::tmem_address(lane, column) == tmem_address(lane, column));
          CHECK(backend::tmem_lane(tmem_address(lane, column)) == lane);
          CHECK(backend::tmem_column(tmem_address(lane, column)) == column);
        }

      // ISA 9.7.16.1, 9.7.16.1.2, 9.7.16.7.1: the accumulator (a CTA's 128 rows: BN fp32
      // columns) and each stage's scales (a .32x128b copy fills 4 columns) within 512 columns;
      // the allocation a power of 2 in [32, 512] that holds them
      const int w_atoms = (t.block_n + 127) / 128;
      const int scale_columns = kSteps * 4 * (1 + w_atoms);
      const int accumulators = kernel_accumulators(t.block_n, t.stages);
      const int used = accumulators * t.block_n + t.stages * scale_columns;
      CHECK_FIELD(name_of(t), "tensor memory columns a stage's scales take", backend::gemm_scale_columns(t.block_n),
                  scale_columns);
      CHECK_FIELD(name_of(t), "tensor memory columns used", backend::gemm_tmem_columns_used(t.block_n, t.stages), used);
      CHECK(used <= 512);
      const unsigned alloc = backend::gemm_tmem_allocation(t.block_n, t.stages);
      CHECK_MESSAGE((alloc >= 32 && alloc <= 512 && (alloc & (alloc - 1)) == 0 && alloc >= unsigned(used) &&
                     alloc / 2 < std::max(32u, unsigned(used))),
                    name_of(t) << ": allocation of " << alloc << " columns for " << used << " used");
      // the copies' columns and the MMAs' scale columns: inside the allocation, clear of the
      // accumulator and of every other stage
      std::vector<int> owner(alloc, -1);
      for (int c = 0; c < accumulators * t.block_n; ++c) owner[c] = 1000;
      for (int s = 0; s < t.stages; ++s) {
        const unsigned sfa = kernel_sfa_column(t.block_n, t.stages, s), sfw = kernel_sfw_column(t.block_n, t.stages, s);
        for (int step = 0; step < kSteps; ++step) {
          // the MMA's scale addresses (lane 0): CUTLASS derives the scale ids from their bits
          // 30-31 (mma_sm100_desc.hpp:606-609), which must agree with the descriptor's 0 ids
          const uint32_t mma_sfa = tmem_address(0, sfa + 4u * unsigned(step)),
                         mma_sfw = tmem_address(0, sfw + 4u * unsigned(step * w_atoms));
          CHECK_FIELD(name_of(t) + " stage " + std::to_string(s) + " step " + std::to_string(step), "A scale id",
                      mma_sfa >> 30, got.a_sf_id);
          CHECK_FIELD(name_of(t) + " stage " + std::to_string(s) + " step " + std::to_string(step), "B scale id",
                      mma_sfw >> 30, got.b_sf_id);
          std::vector<unsigned> copies{sfa + 4u * unsigned(step)};
          for (int a = 0; a < w_atoms; ++a) copies.push_back(sfw + 4u * unsigned(step * w_atoms + a));
          for (unsigned column : copies)
            for (unsigned c = column; c < column + 4; ++c) {
              REQUIRE_MESSAGE(c < alloc, name_of(t) << " stage " << s << " step " << step << ": column " << c
                                                     << " outside the allocation of " << alloc);
              CHECK_MESSAGE(owner[c] == -1, name_of(t) << " stage " << s << " step " << step << ": column " << c
                                                        << " written twice (owner " << owner[c] << ")");
              owner[c] = s;
            }
        }
      }
    }
  }

  TEST_CASE("the emulation's operand layout: TMA's 128-byte swizzle and the ISA's canonical K-major layout") {
    for (const Tile& t : every_candidate_tile()) {
      const StageLayout L = stage_layout(t.block_n, t.ctas);
      for (int s = 0; s < t.stages; ++s)
        for (const auto& [name, tile_at, rows] :
             {std::tuple<const char*, unsigned, int>{"A", L.a_at, backend::GEMM_BM}, {"W", L.w_at, t.block_n / t.ctas}}) {
          const unsigned box = 1024 + unsigned(s) * L.bytes + tile_at;
          long mismatches = 0;
          std::ostringstream first;
          for (int step = 0; step < kSteps; ++step) {
            const uint64_t word = backend::operand_descriptor(box, step);
            const backend::SmemDescriptorFields fields = backend::smem_descriptor_fields(word);
            const SmemDesc mine = decode_smem(word);
            for (int row = 0; row < rows; ++row)
              for (int kk = 0; kk < 64; ++kk) {
                const long k = 64L * step + kk;
                const long emulated = nvfp4k::sm100::emulated::operand_byte(fields, unsigned(row), unsigned(kk));
                const long tma = tma_sw128_byte(box, row, k / 2);
                const long canonical = canonical_k_sw128_byte(long(mine.start_enc) << 4, long(mine.sbo_enc) << 4, row, kk);
                if ((emulated != tma || emulated != canonical) && mismatches++ == 0)
                  first << name_of(t) << " stage " << s << " " << name << " step " << step << " row " << row << " k "
                        << k << ": emulation byte " << emulated << ", TMA SWIZZLE_128B " << tma
                        << ", ISA canonical " << canonical;
              }
          }
          CHECK_MESSAGE(mismatches == 0, mismatches << " elements misplaced; first: " << first.str());
        }
    }
  }

  TEST_CASE("the scale atoms: the kernel's place, CUTLASS's SfKMajorAtom, swizzled128x4, the copy and tensor memory") {
    // one atom: row r's block j (K 16 j of the MMA's 64)
    for (int r = 0; r < 128; ++r)
      for (int j = 0; j < 4; ++j) {
        CAPTURE(r);
        CAPTURE(j);
        CHECK_FIELD("scale atom", "row's word", long(kernel_in_atom(r)) + j, sf_atom_offset(r, 16L * j));
        // within a tile of our swizzled128x4 layout (rows 128 t.., blocks 4 u..)
        for (long kblocks : {4L, 12L})
          for (long tile_row : {0L, 128L})
            for (long u = 0; u < kblocks / 4; ++u) {
              const long at = nvfp4k::scale_offset_swizzled128x4(tile_row + r, 4 * u + j, kblocks);
              CHECK(at - ((tile_row / 128) * (kblocks / 4) + u) * 512 == sf_atom_offset(r, 16L * j));
            }
      }
    // the emulation's .32x128b source: the ISA's K-major no-swizzle layout, whatever the LBO
    for (unsigned atom : {0u, 512u, 17408u, 99328u}) {
      const uint64_t word = backend::scale_descriptor(atom);
      backend::SmemDescriptorFields fields = backend::smem_descriptor_fields(word);
      const SmemDesc mine = decode_smem(word);
      for (unsigned lbo : {fields.leading_byte_offset, 16u, 4096u}) {
        fields.leading_byte_offset = lbo;
        for (unsigned row = 0; row < 32; ++row)
          for (unsigned byte = 0; byte < 16; ++byte)
            CHECK_MESSAGE(long(nvfp4k::sm100::emulated::copy_source_byte(fields, row, byte)) ==
                              canonical_k_none_byte(long(mine.start_enc) << 4, long(mine.sbo_enc) << 4, lbo, row, byte),
                          "atom " << atom << " row " << row << " byte " << byte << " (LBO " << lbo << ")");
      }
    }
    // every tile: row n's block j, written by the kernel into its atom, copied by .32x128b.warpx4
    // (source row r to lane r of each sub-partition, its 16 bytes to 4 columns), lands where
    // CUTLASS's tmem_sf_frg has the MMA read it, for A (M 128) and W (N = BN)
    for (const Tile& t : every_candidate_tile()) {
      const int w_atoms = (t.block_n + 127) / 128;
      for (int step = 0; step < kSteps; ++step)
        for (int operand = 0; operand < 2; ++operand) {
          const int rows = operand == 0 ? backend::GEMM_BM : t.block_n;
          long mismatches = 0;
          std::ostringstream first;
          for (int n = 0; n < rows; ++n)
            for (int j = 0; j < 4; ++j) {
              // the kernel: atom (step, n / 128) at copy column 4 (step * atoms + n / 128) from sfw
              // (A: one atom, column 4 step from sfa); the MMA's scale address: sfa + 4 step,
              // sfw + 4 step atoms
              const int atom = operand == 0 ? 0 : n / 128, atoms = operand == 0 ? 1 : w_atoms;
              const unsigned in_atom = kernel_in_atom(n) + unsigned(j);
              const long copy_column = 4L * (step * atoms + atom), mma_column = 4L * step * atoms;
              const long source_row = in_atom / 16, word = in_atom % 16 / 4, byte = in_atom % 4;
              for (long rep = 0; rep < 4; ++rep) {
                const long lane = 32 * rep + source_row, column_byte = 4 * (copy_column + word - mma_column) + byte;
                const std::pair<long, long> cutlass = tmem_sf_position(n, j, rep, std::max(128, (rows + 127) / 128 * 128));
                if ((lane != cutlass.first || column_byte != cutlass.second) && mismatches++ == 0)
                  first << name_of(t) << " step " << step << (operand == 0 ? " A" : " W") << " row " << n << " block " << j
                        << " replica " << rep << ": kernel lane " << lane << " byte column " << column_byte
                        << ", CUTLASS tmem_sf_frg lane " << cutlass.first << " byte column " << cutlass.second;
              }
            }
          CHECK_MESSAGE(mismatches == 0, mismatches << " scales misplaced; first: " << first.str());
        }
    }
  }

  TEST_CASE("a pair's split of A, B and D between its CTAs: CUTLASS's 2-SM layouts, the kernel's loads, the emulation") {
    int pairs = 0;
    for (const Tile& t : every_candidate_tile()) {
      if (t.ctas != 2) continue;
      ++pairs;
      const long m = 256, n = t.block_n;
      for (const auto& [name, rows, per_cta] : {std::tuple<const char*, long, long>{"A / D", m, 128}, {"B", n, n / 2}}) {
        long mismatches = 0;
        std::ostringstream first;
        for (long row = 0; row < rows; ++row) {
          // CUTLASS: the layout (2,(rows/2,K)):(rows/2,(1,rows)) maps (v, (r, 0)) to operand row
          // v rows/2 + r; find the (v, r) that holds `row`
          long v = -1, r = -1;
          for (long vv = 0; vv < 2; ++vv)
            for (long rr = 0; rr < rows / 2; ++rr)
              if (evaluate({{2, rows / 2}}, vv) + evaluate({{rows / 2, 1}}, rr) == row) v = vv, r = rr;
          // the kernel: CTA `rank` loads A's rows from 128 rank (a_row0) and W's from W_ROWS
          // rank (gemm_w4a4.cuh), and keeps D's rows from 128 rank
          const long kernel_rank = row / per_cta, kernel_row = row - per_cta * kernel_rank;
          const nvfp4k::sm100::emulated::PairRow e = nvfp4k::sm100::emulated::pair_row(unsigned(row), unsigned(per_cta));
          if ((v != kernel_rank || r != kernel_row || long(e.rank) != v || long(e.row) != r) && mismatches++ == 0)
            first << name_of(t) << " " << name << " row " << row << ": CUTLASS CTA " << v << " row " << r << ", kernel "
                  << kernel_rank << " / " << kernel_row << ", emulation " << e.rank << " / " << e.row;
        }
        CHECK_MESSAGE(mismatches == 0, mismatches << " rows misplaced; first: " << first.str());
      }
      CHECK_FIELD(name_of(t), "weight rows a CTA loads", backend::gemm_w_rows(t.block_n, t.ctas), t.block_n / 2);
    }
    CHECK(pairs >= 2);
  }
}
