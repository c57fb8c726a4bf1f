// The wgmma of the sm_90a GEMM's k16 steps (k32 in the W4A8 mode) (sm90/gemm_w4a16.cuh): m64nWk16 with fp32
// accumulators, A (the decoded weights) from registers, B (the activations) from shared memory
// through a descriptor. wgmma's N is part of the instruction and each accumulator an operand of
// its own, so every width is written out: one Wgmma specialization per width wgmma has (8 to
// 256 in steps of 8), each for bf16 and fp16 inputs. The kernel's config (its activation dtype
// and its tile's widths, GemmConfig::NARROW_MMA) picks the instruction. The 8-row decode tile's
// warp-level mma.m16n8k16 on the same fragments is at the end.
#pragma once

#include "common/params.cuh"

namespace nvfp4k::sm90 {

// A width W's H = W/2 accumulators: NVFP4_WGMMA_ACC<H>, their operand numbers in the
// instruction's text; NVFP4_WGMMA_OUT<H>, the operands, d[0] to d[H - 1].
#define NVFP4_WGMMA_ACC4 "%0, %1, %2, %3"
#define NVFP4_WGMMA_ACC8 NVFP4_WGMMA_ACC4 ", %4, %5, %6, %7"
#define NVFP4_WGMMA_ACC12 NVFP4_WGMMA_ACC8 ", %8, %9, %10, %11"
#define NVFP4_WGMMA_ACC16 NVFP4_WGMMA_ACC12 ", %12, %13, %14, %15"
#define NVFP4_WGMMA_ACC20 NVFP4_WGMMA_ACC16 ", %16, %17, %18, %19"
#define NVFP4_WGMMA_ACC24 NVFP4_WGMMA_ACC20 ", %20, %21, %22, %23"
#define NVFP4_WGMMA_ACC28 NVFP4_WGMMA_ACC24 ", %24, %25, %26, %27"
#define NVFP4_WGMMA_ACC32 NVFP4_WGMMA_ACC28 ", %28, %29, %30, %31"
#define NVFP4_WGMMA_ACC36 NVFP4_WGMMA_ACC32 ", %32, %33, %34, %35"
#define NVFP4_WGMMA_ACC40 NVFP4_WGMMA_ACC36 ", %36, %37, %38, %39"
#define NVFP4_WGMMA_ACC44 NVFP4_WGMMA_ACC40 ", %40, %41, %42, %43"
#define NVFP4_WGMMA_ACC48 NVFP4_WGMMA_ACC44 ", %44, %45, %46, %47"
#define NVFP4_WGMMA_ACC52 NVFP4_WGMMA_ACC48 ", %48, %49, %50, %51"
#define NVFP4_WGMMA_ACC56 NVFP4_WGMMA_ACC52 ", %52, %53, %54, %55"
#define NVFP4_WGMMA_ACC60 NVFP4_WGMMA_ACC56 ", %56, %57, %58, %59"
#define NVFP4_WGMMA_ACC64 NVFP4_WGMMA_ACC60 ", %60, %61, %62, %63"
#define NVFP4_WGMMA_ACC68 NVFP4_WGMMA_ACC64 ", %64, %65, %66, %67"
#define NVFP4_WGMMA_ACC72 NVFP4_WGMMA_ACC68 ", %68, %69, %70, %71"
#define NVFP4_WGMMA_ACC76 NVFP4_WGMMA_ACC72 ", %72, %73, %74, %75"
#define NVFP4_WGMMA_ACC80 NVFP4_WGMMA_ACC76 ", %76, %77, %78, %79"
#define NVFP4_WGMMA_ACC84 NVFP4_WGMMA_ACC80 ", %80, %81, %82, %83"
#define NVFP4_WGMMA_ACC88 NVFP4_WGMMA_ACC84 ", %84, %85, %86, %87"
#define NVFP4_WGMMA_ACC92 NVFP4_WGMMA_ACC88 ", %88, %89, %90, %91"
#define NVFP4_WGMMA_ACC96 NVFP4_WGMMA_ACC92 ", %92, %93, %94, %95"
#define NVFP4_WGMMA_ACC100 NVFP4_WGMMA_ACC96 ", %96, %97, %98, %99"
#define NVFP4_WGMMA_ACC104 NVFP4_WGMMA_ACC100 ", %100, %101, %102, %103"
#define NVFP4_WGMMA_ACC108 NVFP4_WGMMA_ACC104 ", %104, %105, %106, %107"
#define NVFP4_WGMMA_ACC112 NVFP4_WGMMA_ACC108 ", %108, %109, %110, %111"
#define NVFP4_WGMMA_ACC116 NVFP4_WGMMA_ACC112 ", %112, %113, %114, %115"
#define NVFP4_WGMMA_ACC120 NVFP4_WGMMA_ACC116 ", %116, %117, %118, %119"
#define NVFP4_WGMMA_ACC124 NVFP4_WGMMA_ACC120 ", %120, %121, %122, %123"
#define NVFP4_WGMMA_ACC128 NVFP4_WGMMA_ACC124 ", %124, %125, %126, %127"

#define NVFP4_WGMMA_D4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define NVFP4_WGMMA_OUT4 NVFP4_WGMMA_D4(0)
#define NVFP4_WGMMA_OUT8 NVFP4_WGMMA_OUT4, NVFP4_WGMMA_D4(4)
#define NVFP4_WGMMA_OUT12 NVFP4_WGMMA_OUT8, NVFP4_WGMMA_D4(8)
#define NVFP4_WGMMA_OUT16 NVFP4_WGMMA_OUT12, NVFP4_WGMMA_D4(12)
#define NVFP4_WGMMA_OUT20 NVFP4_WGMMA_OUT16, NVFP4_WGMMA_D4(16)
#define NVFP4_WGMMA_OUT24 NVFP4_WGMMA_OUT20, NVFP4_WGMMA_D4(20)
#define NVFP4_WGMMA_OUT28 NVFP4_WGMMA_OUT24, NVFP4_WGMMA_D4(24)
#define NVFP4_WGMMA_OUT32 NVFP4_WGMMA_OUT28, NVFP4_WGMMA_D4(28)
#define NVFP4_WGMMA_OUT36 NVFP4_WGMMA_OUT32, NVFP4_WGMMA_D4(32)
#define NVFP4_WGMMA_OUT40 NVFP4_WGMMA_OUT36, NVFP4_WGMMA_D4(36)
#define NVFP4_WGMMA_OUT44 NVFP4_WGMMA_OUT40, NVFP4_WGMMA_D4(40)
#define NVFP4_WGMMA_OUT48 NVFP4_WGMMA_OUT44, NVFP4_WGMMA_D4(44)
#define NVFP4_WGMMA_OUT52 NVFP4_WGMMA_OUT48, NVFP4_WGMMA_D4(48)
#define NVFP4_WGMMA_OUT56 NVFP4_WGMMA_OUT52, NVFP4_WGMMA_D4(52)
#define NVFP4_WGMMA_OUT60 NVFP4_WGMMA_OUT56, NVFP4_WGMMA_D4(56)
#define NVFP4_WGMMA_OUT64 NVFP4_WGMMA_OUT60, NVFP4_WGMMA_D4(60)
#define NVFP4_WGMMA_OUT68 NVFP4_WGMMA_OUT64, NVFP4_WGMMA_D4(64)
#define NVFP4_WGMMA_OUT72 NVFP4_WGMMA_OUT68, NVFP4_WGMMA_D4(68)
#define NVFP4_WGMMA_OUT76 NVFP4_WGMMA_OUT72, NVFP4_WGMMA_D4(72)
#define NVFP4_WGMMA_OUT80 NVFP4_WGMMA_OUT76, NVFP4_WGMMA_D4(76)
#define NVFP4_WGMMA_OUT84 NVFP4_WGMMA_OUT80, NVFP4_WGMMA_D4(80)
#define NVFP4_WGMMA_OUT88 NVFP4_WGMMA_OUT84, NVFP4_WGMMA_D4(84)
#define NVFP4_WGMMA_OUT92 NVFP4_WGMMA_OUT88, NVFP4_WGMMA_D4(88)
#define NVFP4_WGMMA_OUT96 NVFP4_WGMMA_OUT92, NVFP4_WGMMA_D4(92)
#define NVFP4_WGMMA_OUT100 NVFP4_WGMMA_OUT96, NVFP4_WGMMA_D4(96)
#define NVFP4_WGMMA_OUT104 NVFP4_WGMMA_OUT100, NVFP4_WGMMA_D4(100)
#define NVFP4_WGMMA_OUT108 NVFP4_WGMMA_OUT104, NVFP4_WGMMA_D4(104)
#define NVFP4_WGMMA_OUT112 NVFP4_WGMMA_OUT108, NVFP4_WGMMA_D4(108)
#define NVFP4_WGMMA_OUT116 NVFP4_WGMMA_OUT112, NVFP4_WGMMA_D4(112)
#define NVFP4_WGMMA_OUT120 NVFP4_WGMMA_OUT116, NVFP4_WGMMA_D4(116)
#define NVFP4_WGMMA_OUT124 NVFP4_WGMMA_OUT120, NVFP4_WGMMA_D4(120)
#define NVFP4_WGMMA_OUT128 NVFP4_WGMMA_OUT124, NVFP4_WGMMA_D4(124)

// After the H accumulators come the four A registers (operands A0..A3), the descriptor (DESC)
// and the scale-D flag (ONE: 1, D += A.B), which the instruction takes as a predicate; TRANS_B:
// B's transpose flag (", 0"), which 8-bit types do not take (K-major only).
#define NVFP4_WGMMA_ASM(W, H, KTYPE, TRANS_B, A0, A1, A2, A3, DESC, ONE)                                                \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #ONE ", 0;\n"                                                        \
               "wgmma.mma_async.sync.aligned.m64n" #W KTYPE " {" NVFP4_WGMMA_ACC##H "}, {%" #A0 ", %" #A1                 \
               ", %" #A2 ", %" #A3 "}, %" #DESC ", p, 1, 1" TRANS_B ";\n}\n"                                               \
               : NVFP4_WGMMA_OUT##H                                                                                     \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1))

#define NVFP4_WGMMA_WIDTH(W, H, A0, A1, A2, A3, DESC, ONE)                                                        \
  template <>                                                                                                     \
  struct Wgmma<W> {                                                                                               \
    template <int ADT, int N>                                                                                     \
    __device__ __forceinline__ static void mma(float (&d)[N], const unsigned (&a)[4], unsigned long long desc) { \
      if constexpr (ADT == DTYPE_E4M3)                                                                            \
        NVFP4_WGMMA_ASM(W, H, "k32.f32.e4m3.e4m3", "", A0, A1, A2, A3, DESC, ONE);                                \
      else if constexpr (ADT == DTYPE_FP16)                                                                       \
        NVFP4_WGMMA_ASM(W, H, "k16.f32.f16.f16", ", 0", A0, A1, A2, A3, DESC, ONE);                               \
      else                                                                                                        \
        NVFP4_WGMMA_ASM(W, H, "k16.f32.bf16.bf16", ", 0", A0, A1, A2, A3, DESC, ONE);                             \
    }                                                                                                             \
  };

template <int W>
struct Wgmma;

NVFP4_WGMMA_WIDTH(8, 4, 4, 5, 6, 7, 8, 9)
NVFP4_WGMMA_WIDTH(16, 8, 8, 9, 10, 11, 12, 13)
NVFP4_WGMMA_WIDTH(24, 12, 12, 13, 14, 15, 16, 17)
NVFP4_WGMMA_WIDTH(32, 16, 16, 17, 18, 19, 20, 21)
NVFP4_WGMMA_WIDTH(40, 20, 20, 21, 22, 23, 24, 25)
NVFP4_WGMMA_WIDTH(48, 24, 24, 25, 26, 27, 28, 29)
NVFP4_WGMMA_WIDTH(56, 28, 28, 29, 30, 31, 32, 33)
NVFP4_WGMMA_WIDTH(64, 32, 32, 33, 34, 35, 36, 37)
NVFP4_WGMMA_WIDTH(72, 36, 36, 37, 38, 39, 40, 41)
NVFP4_WGMMA_WIDTH(80, 40, 40, 41, 42, 43, 44, 45)
NVFP4_WGMMA_WIDTH(88, 44, 44, 45, 46, 47, 48, 49)
NVFP4_WGMMA_WIDTH(96, 48, 48, 49, 50, 51, 52, 53)
NVFP4_WGMMA_WIDTH(104, 52, 52, 53, 54, 55, 56, 57)
NVFP4_WGMMA_WIDTH(112, 56, 56, 57, 58, 59, 60, 61)
NVFP4_WGMMA_WIDTH(120, 60, 60, 61, 62, 63, 64, 65)
NVFP4_WGMMA_WIDTH(128, 64, 64, 65, 66, 67, 68, 69)
NVFP4_WGMMA_WIDTH(136, 68, 68, 69, 70, 71, 72, 73)
NVFP4_WGMMA_WIDTH(144, 72, 72, 73, 74, 75, 76, 77)
NVFP4_WGMMA_WIDTH(152, 76, 76, 77, 78, 79, 80, 81)
NVFP4_WGMMA_WIDTH(160, 80, 80, 81, 82, 83, 84, 85)
NVFP4_WGMMA_WIDTH(168, 84, 84, 85, 86, 87, 88, 89)
NVFP4_WGMMA_WIDTH(176, 88, 88, 89, 90, 91, 92, 93)
NVFP4_WGMMA_WIDTH(184, 92, 92, 93, 94, 95, 96, 97)
NVFP4_WGMMA_WIDTH(192, 96, 96, 97, 98, 99, 100, 101)
NVFP4_WGMMA_WIDTH(200, 100, 100, 101, 102, 103, 104, 105)
NVFP4_WGMMA_WIDTH(208, 104, 104, 105, 106, 107, 108, 109)
NVFP4_WGMMA_WIDTH(216, 108, 108, 109, 110, 111, 112, 113)
NVFP4_WGMMA_WIDTH(224, 112, 112, 113, 114, 115, 116, 117)
NVFP4_WGMMA_WIDTH(232, 116, 116, 117, 118, 119, 120, 121)
NVFP4_WGMMA_WIDTH(240, 120, 120, 121, 122, 123, 124, 125)
NVFP4_WGMMA_WIDTH(248, 124, 124, 125, 126, 127, 128, 129)
NVFP4_WGMMA_WIDTH(256, 128, 128, 129, 130, 131, 132, 133)

// The first W/2 of a thread's accumulators d += A . B over k16 (k32 for E4M3): A's fragment in
// `a`, B through the shared-memory descriptor `desc`, both of dtype ADT (DTYPE_BF16, DTYPE_FP16
// or DTYPE_E4M3; an E4M3 fragment's four registers hold four values each).
template <int W, int ADT, int N>
__device__ __forceinline__ void wgmma(float (&d)[N], const unsigned (&a)[4], unsigned long long desc) {
  static_assert(W >= 8 && W <= 256 && W % 8 == 0, "wgmma's N is 8 to 256 in steps of 8");
  static_assert(W / 2 <= N, "a width of W holds W/2 accumulators a thread");
  static_assert(ADT == DTYPE_BF16 || ADT == DTYPE_FP16 || ADT == DTYPE_E4M3, "wgmma's inputs: bf16, fp16 or e4m3");
  Wgmma<W>::template mma<ADT>(d, a, desc);
}

// The warp-level product of the 8-row decode tile (GemmConfig::WARP_MMA): d += A . B over k16
// with A (16 weight rows) in the wgmma fragment's registers, which are mma.m16n8k16's A
// fragment, and B (8 activation rows) in two registers from ldmatrix; d's four accumulators are
// those wgmma m64n8 gives the warp's rows.
template <int ADT>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  static_assert(ADT == DTYPE_BF16 || ADT == DTYPE_FP16, "mma.m16n8k16's inputs here: bf16 or fp16");
  if constexpr (ADT == DTYPE_BF16)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

}  // namespace nvfp4k::sm90
