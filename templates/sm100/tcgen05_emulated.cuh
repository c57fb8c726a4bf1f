// An exact emulation of the tcgen05 subset the sm_100a GEMM uses (sm100/tcgen05.cuh), for
// running that kernel on an sm_90a device: the GEMM's test facility NVFP4_JIT_EMULATE_ARCH.
// It follows the PTX ISA (9.7.16) and reads everything the hardware would read: the shared
// memory descriptors' fields (start, LBO, SBO, swizzle, base offset, the fixed bits), the
// instruction descriptor's (types, scale type, M, N, scale ids, the reserved bits) and the
// tensor memory addresses (lane, column). What the kernel does not use traps (an unknown field
// value, a swizzle mode other than the ones below), so a wrong descriptor cannot pass unseen.
//
// Tensor memory is a per-CTA region of global memory, 128 lanes x 512 columns of 32 bits,
// addressed as the ISA's lane << 16 | column; an allocation is filled with NaN, so a read of
// what no MMA or copy wrote shows up in D. Operations complete when issued (the ISA allows any
// completion order; this is one), so commit arrives at once.
//
// .cta_group::2 (CTAS 2, a pair: cluster ranks 2i and 2i + 1, ISA 9.7.16.5.1) as the kernel
// issues it from the even CTA: the MMA (M 256) takes A's rows 0-127 and D's from the even CTA,
// rows 128-255 from the odd, B's first N / 2 rows from the even CTA and the rest from the odd;
// each CTA's operands at the descriptors' offsets in its own shared memory (read through
// distributed shared memory), each CTA's scale factors and D at the same tensor memory
// addresses in its own tensor memory (both CTAs hold SF_B for all N columns); cp copies each
// CTA's atom into its own tensor memory; commit arrives on both CTAs' barriers. The ISA states
// that cp and the MMA reach both CTAs' tensor memory; that each reads each CTA's own shared
// memory and tensor memory at the one set of addresses is how CUTLASS's 2-SM kernels use them
// (cute/atom/mma_traits_sm100.hpp SM100_MMA_MXF4_2x1SM_SS: A (2,(M/2,K)), B (2,(N/2,K)), D
// (2,(M/2,N)); the SF_B tile of round_up(N, 128) columns per CTA).
//
// Layouts (ISA 9.7.16.3.3, 9.7.16.10.5.4, 9.7.16.10.7 and 9.7.16.9.2):
//   A (M x K) and B (N x K), K-major, 128-byte swizzle: element (row, k) of an MMA is nibble
//     k % 2 (low first) of the byte at linear = start + (row / 8) SBO + (row % 8) 128 + k / 2,
//     swizzled as linear ^ ((linear >> 7) % 8) << 4 (Swizzle<3,4,3> on byte addresses, the
//     pattern repeating every 1024 bytes: base offset 0).
//   D (M = 128, .cta_group::1): row m in lane m, column n in column d + n.
//   Scale factors, .scale_vec::4X: row m of SF_A (its 4 block scales, byte j for k 16 j ..)
//     in column sfa + m / 32 of lane m % 32 of every 32-lane partition (the ISA requires them
//     duplicated to all four); the MMA reads row m's from partition m / 32. Column n of SF_B in
//     column sfb + n / 32 of lane n % 32, read by the rows of each partition from their own.
//   tcgen05.cp .32x128b.warpx4, no swizzle: row r (16 bytes at start + (r / 8) SBO + (r % 8) 16)
//     to lane r of each partition, its 4 words to columns taddr .. taddr + 3.
#pragma once
#include "common/nvfp4_format.cuh"
#include "sm100/descriptors.cuh"
#if defined(__CUDACC__)
#include "common/ptx/cluster.cuh"
#endif

namespace nvfp4k::sm100::emulated {

inline constexpr unsigned TMEM_LANES = 128, TMEM_COLUMNS = 512;
inline constexpr unsigned MAX_CTAS = 160;  // a persistent grid: at most one CTA per SM

// The byte of an operand's element (row, k) that a K-major 128-byte swizzled descriptor names.
NVFP4_HD unsigned operand_byte(const SmemDescriptorFields& f, unsigned row, unsigned k) {
  const unsigned linear = f.start_address + (row / 8) * f.stride_byte_offset + (row % 8) * 128 + k / 2;
  return linear ^ ((linear >> 7) & 7u) << 4;
}

// The byte `byte` (0..15) of row r (0..31) of a .32x128b copy's unswizzled source.
NVFP4_HD unsigned copy_source_byte(const SmemDescriptorFields& f, unsigned row, unsigned byte) {
  return f.start_address + (row / 8) * f.stride_byte_offset + (row % 8) * 16 + byte;
}

// Where row `row` of a pair's MMA operand or of its D lies: the CTA (its rank in the pair) and
// the row there, `rows_per_cta` a CTA (A and D: 128; B: N / 2).
struct PairRow {
  unsigned rank, row;
};
NVFP4_HD constexpr PairRow pair_row(unsigned row, unsigned rows_per_cta) { return {row / rows_per_cta, row % rows_per_cta}; }

#if defined(__CUDACC__)

__device__ unsigned tmem_cells[MAX_CTAS][TMEM_LANES * TMEM_COLUMNS];
__device__ unsigned tmem_allocated[MAX_CTAS];  // columns this CTA holds (0: none)

__device__ __noinline__ void fail(const char* what) {
  printf("tcgen05 emulation, block %u: %s\n", blockIdx.x, what);
  __trap();
}

__device__ __forceinline__ unsigned cta() {
  if (gridDim.x * gridDim.y * gridDim.z > MAX_CTAS) fail("more CTAs than the emulated tensor memories");
  return blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
}
// This CTA's rank (0 or 1) in its pair (CTAS 2), checked: a volatile read of the special
// registers, so callers read it once an instruction (Pair).
template <int CTAS>
__device__ __forceinline__ unsigned pair_rank() {
  if constexpr (CTAS == 1) {
    return 0;
  } else {
    unsigned rank, size;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\nmov.u32 %1, %%cluster_nctarank;" : "=r"(rank), "=r"(size));
    if (size != 2 || rank != blockIdx.x % 2) fail(".cta_group::2: not a cluster of 2 CTAs along x");
    return rank;
  }
}

__device__ __forceinline__ unsigned* cell_of(unsigned cta, unsigned lane, unsigned column) {
  return &tmem_cells[cta][lane * TMEM_COLUMNS + column];
}
__device__ __forceinline__ unsigned* cell(unsigned lane, unsigned column) { return cell_of(cta(), lane, column); }
// Checks that [column, column + count) of `lane` are allocated in the tensor memory of `cta`.
__device__ __forceinline__ void check_cells_of(unsigned cta, unsigned lane, unsigned column, unsigned count) {
  if (lane >= TMEM_LANES || column + count > tmem_allocated[cta]) fail("access outside the allocated tensor memory");
}
__device__ __forceinline__ void check_cells(unsigned lane, unsigned column, unsigned count) {
  check_cells_of(cta(), lane, column, count);
}

// This CTA's pair as one instruction's emulation sees it: its own rank, the tensor memory index
// of the CTA of rank `rank`, and a shared memory word or byte at `address` (shared::cta) of that
// CTA (this CTA's own directly, the other's through distributed shared memory).
template <int CTAS>
struct Pair {
  unsigned own;

  __device__ __forceinline__ Pair() : own(pair_rank<CTAS>()) {}

  __device__ __forceinline__ unsigned cta_of(unsigned rank) const { return cta() - own + rank; }
  __device__ __forceinline__ unsigned ld_u32(unsigned address, unsigned rank) const {
    unsigned v;
    if (CTAS == 1 || rank == own)
      asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(address) : "memory");
    else
      asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(v) : "r"(cluster_address(address, rank)) : "memory");
    return v;
  }
  __device__ __forceinline__ unsigned ld_u8(unsigned address, unsigned rank) const {
    unsigned short v;
    if (CTAS == 1 || rank == own)
      asm volatile("ld.shared.u8 %0, [%1];" : "=h"(v) : "r"(address) : "memory");
    else
      asm volatile("ld.shared::cluster.u8 %0, [%1];" : "=h"(v) : "r"(cluster_address(address, rank)) : "memory");
    return v;
  }
};

// tcgen05.alloc (+ relinquish_alloc_permit): one warp; columns a power of 2 in [32, 512].
__device__ __forceinline__ void tmem_alloc(unsigned* dst, unsigned columns) {
  __syncwarp();
  const unsigned lane = threadIdx.x % 32;
  if (columns < 32 || columns > TMEM_COLUMNS || (columns & (columns - 1)))
    fail("tcgen05.alloc: columns not a power of 2 in [32, 512]");
  if (lane == 0) {
    if (tmem_allocated[cta()] != 0) fail("tcgen05.alloc: tensor memory still allocated (no dealloc before exit?)");
    tmem_allocated[cta()] = columns;
  }
  __syncwarp();
  for (unsigned i = lane; i < TMEM_LANES * columns; i += 32) __stcg(cell(i / columns, i % columns), 0x7FC0DEADu);
  __threadfence_block();
  if (lane == 0) *dst = tmem_address(0, 0);
  __syncwarp();
}

__device__ __forceinline__ void tmem_dealloc(unsigned address, unsigned columns) {
  __syncwarp();
  if (threadIdx.x % 32 == 0) {
    if (address != tmem_address(0, 0) || columns != tmem_allocated[cta()])
      fail("tcgen05.dealloc: not the allocation");
    tmem_allocated[cta()] = 0;
  }
  __syncwarp();
}

__device__ __forceinline__ void check_descriptor(const SmemDescriptorFields& f, unsigned swizzle) {
  if (f.fixed_001 != 1 || f.fixed_zero != 0) fail("shared memory descriptor: the fixed bits 46-48 / 53-60 are wrong");
  if (f.lbo_absolute) fail("shared memory descriptor: absolute leading dimension mode (sm_103a only; unused)");
  if (f.base_offset != 0) fail("shared memory descriptor: a base offset (the kernel's buffers are pattern aligned)");
  if (f.swizzle != swizzle) fail("shared memory descriptor: a swizzle mode the kernel does not use");
  if (swizzle == SWIZZLE_128B && (f.start_address & ~0x7Fu) % 1024 != 0)
    fail("shared memory descriptor: a 128-byte swizzled operand outside a 1024-byte aligned pattern");
}

// tcgen05.cp.cta_group::CTAS.32x128b.warpx4 [address], desc: one thread.
template <int CTAS>
__device__ __forceinline__ void copy_32x128b_warpx4(unsigned address, unsigned long long desc) {
  const SmemDescriptorFields f = smem_descriptor_fields(desc);
  check_descriptor(f, SWIZZLE_NONE);
  if (tmem_lane(address) != 0) fail("tcgen05.cp .warpx4: a lane other than 0");
  const unsigned column = tmem_column(address);
  const Pair<CTAS> pair;
  for (unsigned rank = 0; rank < CTAS; ++rank) {
    const unsigned to = pair.cta_of(rank);
    check_cells_of(to, 0, column, 4);
    for (unsigned r = 0; r < 32; ++r)
      for (unsigned w = 0; w < 4; ++w) {
        const unsigned word = pair.ld_u32(copy_source_byte(f, r, 4 * w), rank);
        for (unsigned q = 0; q < 4; ++q) __stcg(cell_of(to, 32 * q + r, column + w), word);
      }
  }
}

// tcgen05.mma.cta_group::CTAS.kind::mxf4nvf4.block_scale.scale_vec::4X: the whole warp. Lane l
// computes D's columns l, l + 32, ...: each column's B values decoded once, then every row's
// sum in k order 0..63 onto D (or 0), one fp32 rounding per product added. An E2M1 x E4M3
// product has at most 6 significant bits, the product of two at most 12: exact in fp32, so
// only the sum's order is the emulation's (the instruction's is unspecified).
template <int CTAS>
__device__ __forceinline__ void mma_mxf4nvf4(unsigned d, unsigned long long a_desc, unsigned long long b_desc,
                                             unsigned idesc, unsigned sfa, unsigned sfb, bool accumulate) {
  __syncwarp();
  const InstrDescriptorFields id = instr_descriptor_fields(idesc);
  if (id.sparse || id.negate_a || id.negate_b || id.transpose_a || id.transpose_b || id.k96 || id.reserved)
    fail("instruction descriptor: sparse, negated, transposed, K = 96 or reserved bits: not the kernel's MMA");
  if (id.a_type != 1 || id.b_type != 1) fail("instruction descriptor: A or B not E2M1");
  if (id.scale_type != 0) fail("instruction descriptor: scale type not UE4M3");
  if (id.a_scale_id != 0 || id.b_scale_id != 0) fail("instruction descriptor: scale factor ids must be 0 with 4X");
  if (id.m != 128u * CTAS) fail("instruction descriptor: M other than 128 (.cta_group::1) or 256 (.cta_group::2)");
  if (id.n < 8u * CTAS || id.n > 256 || id.n % (8u * CTAS)) fail("instruction descriptor: N not 8..256 by 8 (16 by 16 for M 256)");
  const SmemDescriptorFields fa = smem_descriptor_fields(a_desc), fb = smem_descriptor_fields(b_desc);
  check_descriptor(fa, SWIZZLE_128B);
  check_descriptor(fb, SWIZZLE_128B);
  if (tmem_lane(d) != 0 || tmem_lane(sfa) != 0 || tmem_lane(sfb) != 0) fail("tcgen05.mma: a tensor memory lane other than 0");
  const unsigned dc = tmem_column(d), ac = tmem_column(sfa), bc = tmem_column(sfb);
  const Pair<CTAS> pair;
  for (unsigned rank = 0; rank < CTAS; ++rank) {
    check_cells_of(pair.cta_of(rank), 0, dc, id.n);
    check_cells_of(pair.cta_of(rank), 0, ac, 4);
    check_cells_of(pair.cta_of(rank), 0, bc, (id.n + 31) / 32);
  }
  const unsigned b_rows = id.n / CTAS;  // B's rows in each CTA's shared memory
  for (unsigned n = threadIdx.x % 32; n < id.n; n += 32) {
    const PairRow bn = pair_row(n, b_rows);
    float b[64];
#pragma unroll 1
    for (unsigned k = 0; k < 64; k += 2) {
      const unsigned byte = pair.ld_u8(operand_byte(fb, bn.row, k), bn.rank);
      b[k] = e2m1_to_float(byte & 15u);
      b[k + 1] = e2m1_to_float(byte >> 4);
    }
#pragma unroll 1
    for (unsigned row = 0; row < 128u * CTAS; ++row) {
      const PairRow am = pair_row(row, 128);
      const unsigned rank = am.rank, m = am.row, partition = m / 32, at = pair.cta_of(rank);
      const unsigned sa = __ldcg(cell_of(at, m, ac + m / 32)), sb = __ldcg(cell_of(at, 32 * partition + n % 32, bc + n / 32));
      float acc = accumulate ? __uint_as_float(__ldcg(cell_of(at, m, dc + n))) : 0.0f;
#pragma unroll 1
      for (unsigned k = 0; k < 64; k += 2) {
        const unsigned byte = pair.ld_u8(operand_byte(fa, m, k), rank);
        const float sak = e4m3_to_float(sa >> (8 * (k / 16)) & 0xFFu), sbk = e4m3_to_float(sb >> (8 * (k / 16)) & 0xFFu);
        acc = __fadd_rn(acc, __fmul_rn(e2m1_to_float(byte & 15u) * sak, b[k] * sbk));
        acc = __fadd_rn(acc, __fmul_rn(e2m1_to_float(byte >> 4) * sak, b[k + 1] * sbk));
      }
      __stcg(cell_of(at, m, dc + n), __float_as_uint(acc));
    }
  }
  __syncwarp();
}

// tcgen05.commit.cta_group::CTAS.mbarrier::arrive::one (a pair's .multicast::cluster to both
// CTAs): the operations are done; one arrival on each CTA's barrier.
template <int CTAS>
__device__ __forceinline__ void commit(unsigned long long* bar) {
  __syncwarp();
  if (CTAS == 2)
    __threadfence();  // the odd CTA's tensor memory, written here
  else
    __threadfence_block();
  if (threadIdx.x % 32 == 0) {
    if (CTAS == 1)
      asm volatile("mbarrier.arrive.release.cluster.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
    else
      for (unsigned rank = 0; rank < 2; ++rank)
        mbar_arrive_cluster(cluster_address(smem_u32(bar), cluster_ctarank() - pair_rank<CTAS>() + rank));
  }
  __syncwarp();
}

// tcgen05.ld.sync.aligned.32x32b.x32 (+ wait::ld): warp w of a warpgroup reaches lanes 32 (w % 4) ..
__device__ __forceinline__ void load_32x32b(unsigned address, float (&v)[32]) {
  const unsigned lane = tmem_lane(address), column = tmem_column(address);
  if (lane != 32 * (threadIdx.x / 32 % 4)) fail("tcgen05.ld: lanes this warp cannot access (ISA 9.7.16.8.1)");
  check_cells(lane + threadIdx.x % 32, column, 32);
  for (int i = 0; i < 32; ++i) v[i] = __uint_as_float(__ldcg(cell(lane + threadIdx.x % 32, column + i)));
  __syncwarp();
}

#endif

}  // namespace nvfp4k::sm100::emulated
