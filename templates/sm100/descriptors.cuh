// The sm_100a / sm_103a GEMM's tcgen05 descriptors and tensor-memory addresses, one definition
// for the kernel, its emulation and the host's tests. Written from the PTX ISA (9.0):
//   9.7.16.1.1  Tensor Memory addressing: lane in bits 31-16, column in bits 15-0
//   9.7.16.4.1  Shared memory descriptor (Table 40) and the swizzle's repeating pattern (Table 41)
//   9.7.16.4.2  Instruction descriptor for .kind::mxf4nvf4 (Table 44 in ISA 9.0, 47 in later versions)
//   9.7.16.3.3  Canonical layouts: K-major, 128-byte swizzle: Swizzle<3,4,3> o ((8,m),(T,2k)):((8T,SBO),(1,T))
// The kernel's operands (A and W tiles, K-major, as TMA's 128-byte swizzle writes them) and its
// scale factors (the 128 x 4 atoms of 512 bytes, unswizzled) are described by the functions at
// the end; the emulation decodes the same fields the hardware would.
#pragma once
#include "common/portable.cuh"

namespace nvfp4k::sm100 {

// Table 40, bits 61-63.
enum SmemSwizzle : unsigned {
  SWIZZLE_NONE = 0,
  SWIZZLE_128B_BASE32B = 1,
  SWIZZLE_128B = 2,
  SWIZZLE_64B = 4,
  SWIZZLE_32B = 6,
};

// matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4
NVFP4_HD constexpr unsigned long long descriptor_encode(unsigned x) { return (x & 0x3FFFFu) >> 4; }

// Table 40: start address (bits 0-13), leading dimension byte offset (16-29, relative mode),
// stride dimension byte offset (32-45), the fixed 0b001 (46-48), the base offset (49-51), the
// leading dimension mode (52: 0, relative), the fixed zeros (53-60) and the swizzle (61-63).
NVFP4_HD constexpr unsigned long long smem_descriptor(unsigned start_address, unsigned leading_byte_offset,
                                                      unsigned stride_byte_offset, unsigned swizzle,
                                                      unsigned base_offset = 0) {
  return descriptor_encode(start_address) | descriptor_encode(leading_byte_offset) << 16 |
         descriptor_encode(stride_byte_offset) << 32 | 1ull << 46 | (unsigned long long)(base_offset & 7u) << 49 |
         (unsigned long long)(swizzle & 7u) << 61;
}

// A shared memory descriptor's fields, as the emulation reads them.
struct SmemDescriptorFields {
  unsigned start_address, leading_byte_offset, stride_byte_offset;  // bytes
  unsigned fixed_001, base_offset, lbo_absolute, fixed_zero, swizzle;
};
NVFP4_HD constexpr SmemDescriptorFields smem_descriptor_fields(unsigned long long d) {
  return {unsigned(d & 0x3FFFu) << 4,         unsigned(d >> 16 & 0x3FFFu) << 4, unsigned(d >> 32 & 0x3FFFu) << 4,
          unsigned(d >> 46 & 7u),              unsigned(d >> 49 & 7u),           unsigned(d >> 52 & 1u),
          unsigned(d >> 53 & 0xFFu),           unsigned(d >> 61 & 7u)};
}

// The instruction descriptor table, .kind::mxf4nvf4 column: dense (bit 2: 0), matrix B scale factor id 0 (4-5), atype E2M1 = 1
// (7-9), btype E2M1 = 1 (10-11), no negation (13, 14), K-major A and B (15, 16: no transpose),
// N >> 3 (17-22), scale type UE4M3 = 0 (23), M >> 7 (27-28), matrix A scale factor id 0 (29-30),
// K = 64 (31: 0).
NVFP4_HD constexpr unsigned instr_descriptor_mxf4nvf4(int m, int n) {
  return 1u << 7 | 1u << 10 | unsigned(n >> 3) << 17 | unsigned(m >> 7) << 27;
}

struct InstrDescriptorFields {
  unsigned sparse, b_scale_id, a_type, b_type, negate_a, negate_b, transpose_a, transpose_b, n, scale_type, m,
      a_scale_id, k96, reserved;  // reserved: bits 0-1, 3, 6, 12, 24-26, any set
};
NVFP4_HD constexpr InstrDescriptorFields instr_descriptor_fields(unsigned d) {
  return {d >> 2 & 1u,         d >> 4 & 3u,       d >> 7 & 7u,  d >> 10 & 3u, d >> 13 & 1u,
          d >> 14 & 1u,        d >> 15 & 1u,      d >> 16 & 1u, (d >> 17 & 0x3Fu) << 3,
          d >> 23 & 1u,        (d >> 27 & 3u) << 7, d >> 29 & 3u, d >> 31 & 1u,
          d & (3u | 1u << 3 | 1u << 6 | 1u << 12 | 7u << 24)};
}

// 9.7.16.1.1: lane in bits 31-16, column in bits 15-0.
NVFP4_HD constexpr unsigned tmem_address(unsigned lane, unsigned column) { return lane << 16 | column; }
NVFP4_HD constexpr unsigned tmem_lane(unsigned address) { return address >> 16; }
NVFP4_HD constexpr unsigned tmem_column(unsigned address) { return address & 0xFFFFu; }

// The kernel's operand tiles: rows of 128 bytes (256 E2M1 values of K) as TMA's 128-byte
// swizzle writes a box 128 bytes wide into a 1024-byte aligned buffer: 8-row groups 1024 bytes
// apart (SBO), the leading byte offset unused by a swizzled K-major layout (encoded as 1, 16
// bytes, as the ISA's examples assume). MMA step s (K 64 a step, 32 bytes) starts 32 s bytes in:
// the swizzle applies to the address bits, so the step's chunks are found where TMA put them.
inline constexpr unsigned OPERAND_ROW_BYTES = 128;
inline constexpr unsigned OPERAND_GROUP_BYTES = 8 * OPERAND_ROW_BYTES;
NVFP4_HD constexpr unsigned long long operand_descriptor(unsigned tile_address, int step) {
  return smem_descriptor(tile_address + 32u * unsigned(step), 16, OPERAND_GROUP_BYTES, SWIZZLE_128B);
}

// The kernel's scale factors: per MMA step and 128 rows one atom of 512 bytes (row r's four
// block scales at (r % 32) * 16 + (r / 32) * 4: the swizzled 128x4 layout's tile), copied by
// tcgen05.cp .32x128b.warpx4: 32 rows of 16 bytes, unswizzled, 8-row groups 128 bytes apart.
inline constexpr unsigned SCALE_ATOM_BYTES = 512;
NVFP4_HD constexpr unsigned long long scale_descriptor(unsigned atom_address) {
  return smem_descriptor(atom_address, 16, 128, SWIZZLE_NONE);
}

}  // namespace nvfp4k::sm100
