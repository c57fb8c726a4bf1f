// The arithmetic of the fused quantize prologues (RMSNorm, SwiGLU), written once for the
// kernels and the CPU reference. Every operation is an explicitly rounded fp32 operation
// (portable.cuh: no contraction into FMAs the other side would not make), and exp is our
// own, so device and host produce the same bits.
#pragma once
#include "common/nvfp4_format.cuh"
#include "common/params.cuh"

namespace nvfp4k {

// fp32 rounded to DTYPE and back (the value a tensor of that dtype would hold).
template <int DTYPE>
NVFP4_HD float round_to(float f) {
  if (DTYPE == DTYPE_BF16) return bf16_bits_to_float(float_to_bf16_bits(f));
  if (DTYPE == DTYPE_FP16) return fp16_bits_to_float(float_to_fp16_bits(f));
  return f;
}

// e^x within 2 ulp: x = n ln2 + r (Cody-Waite, |r| <= ln2/2), a degree-7 Taylor polynomial
// for e^r, then 2^n applied in two exact halves so subnormal results round once.
NVFP4_HD float exp_fp32(float x) {
  if (!(x == x)) return x;
  if (x > 88.72283935546875f) return bits_to_float(0x7F800000u);
  if (x < -103.97208f) return 0.0f;
  const float n = rint_even(mul_rn(x, 1.44269502162933349609375f));
  float r = fma_rn(n, -0.693145751953125f, x);  // ln2's high part: n * it is exact
  r = fma_rn(n, -1.428606765330187045e-06f, r);
  float p = 1.98412698e-4f;  // 1/5040
  p = fma_rn(p, r, 1.38888889e-3f);
  p = fma_rn(p, r, 8.33333377e-3f);
  p = fma_rn(p, r, 4.16666679e-2f);
  p = fma_rn(p, r, 0.166666672f);
  p = fma_rn(p, r, 0.5f);
  p = fma_rn(p, r, 1.0f);
  p = fma_rn(p, r, 1.0f);
  const int e = int(n), e1 = e / 2, e2 = e - e1;  // each half in [-75, 64]
  return mul_rn(mul_rn(p, bits_to_float(unsigned(e1 + 127) << 23)), bits_to_float(unsigned(e2 + 127) << 23));
}

// silu(g) * u = g / (1 + e^-g) * u.
NVFP4_HD float silu_mul(float g, float u) { return mul_rn(div_rn(g, add_rn(1.0f, exp_fp32(-g))), u); }

// 1 / sqrt(sum_sq / k + eps), correctly rounded at each step.
NVFP4_HD float inv_rms(float sum_sq, float k, float eps) { return div_rn(1.0f, sqrt_rn(add_rn(div_rn(sum_sq, k), eps))); }

// The RMSNorm of one value as frameworks compute it: normalized, rounded to the tensor's
// dtype, times the weight, rounded again.
template <int DTYPE>
NVFP4_HD float rmsnorm_value(float x, float inv, float w) { return round_to<DTYPE>(mul_rn(round_to<DTYPE>(mul_rn(x, inv)), w)); }

// rmsnorm_value of two 16-bit values x0, x1 with the weights in `w` (DTYPE's bits, element 0
// in the low half), packed the same way. The second product, of two 16-bit values, is exact
// in fp32 wherever the result is not rounded to zero, so one packed 16-bit multiply rounds it
// the same as the fp32 product rounded to DTYPE.
template <int DTYPE>
NVFP4_HD unsigned rmsnorm_pair(float x0, float x1, float inv, unsigned w) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  unsigned d;
  if (DTYPE == DTYPE_BF16) asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(pack_bf16x2(mul_rn(x0, inv), mul_rn(x1, inv))), "r"(w));
  else asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(pack_fp16x2(mul_rn(x0, inv), mul_rn(x1, inv))), "r"(w));
  return d;
#else
  auto widen = [](unsigned h) { return DTYPE == DTYPE_BF16 ? bf16_bits_to_float(h) : fp16_bits_to_float(h); };
  const float lo = rmsnorm_value<DTYPE>(x0, inv, widen(w & 0xFFFFu)), hi = rmsnorm_value<DTYPE>(x1, inv, widen(w >> 16));
  return DTYPE == DTYPE_BF16 ? pack_bf16x2(lo, hi) : pack_fp16x2(lo, hi);
#endif
}

// rmsnorm_value of two 16-bit values x0, x1 with fp32 weights w0, w1, packed as rmsnorm_pair
// packs them: both roundings as packs of two (a pack rounds each value to DTYPE, the same as
// round_to), the products in fp32 between them.
template <int DTYPE>
NVFP4_HD unsigned rmsnorm_pair_fp32_weight(float x0, float x1, float inv, float w0, float w1) {
  auto pack = [](float lo, float hi) { return DTYPE == DTYPE_BF16 ? pack_bf16x2(lo, hi) : pack_fp16x2(lo, hi); };
  auto widen = [](unsigned h) { return DTYPE == DTYPE_BF16 ? bf16_bits_to_float(h) : fp16_bits_to_float(h); };
  const unsigned n = pack(mul_rn(x0, inv), mul_rn(x1, inv));
  return pack(mul_rn(widen(n & 0xFFFFu), w0), mul_rn(widen(n >> 16), w1));
}

}  // namespace nvfp4k
