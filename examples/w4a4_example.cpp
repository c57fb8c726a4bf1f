// A ModelOpt NVFP4 layer served W4A4 on the GPU: RMSNorm + quantize of the hidden states in
// one pass with the layer's input_scale, then the NVFP4 x NVFP4 GEMM. The weight is quantized
// on the CPU first (as an offline checkpoint step would). Checks: the quantized activations
// are bit-identical with the CPU reference, and the GEMM is within BF16 output rounding of a
// float64 product of the decoded operands. Public API + CUDA runtime.
//
//   w4a4_example [M N K]      exit 0: checks pass; 1: a check failed; 2: no GPU / error
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "example_util.hpp"
#include "nvfp4/jit.hpp"

using example::from_bf16;
using example::to_bf16;
using example::upload;

int main(int argc, char** argv) {
  using namespace nvfp4::jit;
  const long m = argc > 3 ? std::atol(argv[1]) : 16, n = argc > 3 ? std::atol(argv[2]) : 4096,
             k = argc > 3 ? std::atol(argv[3]) : 4096;
  if (!example::first_gpu()) return 2;
  std::mt19937 rng(std::random_device{}());
  std::normal_distribution<float> normal(0.0f, 1.0f);

  // The checkpoint: weight quantized on the CPU (weight, weight_scale, weight_scale_2).
  std::vector<uint16_t> w(n * k), hidden(m * k), norm_weight(k);
  for (auto& x : w) x = to_bf16(0.02f * normal(rng));
  for (auto& x : hidden) x = to_bf16(3.0f * normal(rng));
  for (auto& x : norm_weight) x = to_bf16(1.0f + 0.1f * normal(rng));
  std::vector<uint8_t> weight(n * k / 2), weight_scale(scale_bytes(ScaleLayout::linear, n, k));
  float weight_scale_2 = 0;
  QuantizeArgs wq;
  wq.in = w.data(), wq.rows = n, wq.k = k, wq.out = weight.data(), wq.scales = weight_scale.data();
  wq.scale_mode = GlobalScaleMode::compute_per_tensor;
  wq.global_scale_out = &weight_scale_2;
  cpu::quantize(wq);

  // input_scale, as calibration would set it: amax of the normalized activations / (6 * 448).
  std::vector<uint16_t> normed(m * k);
  std::vector<uint8_t> x_ref(m * k / 2), xs_ref(scale_bytes(ScaleLayout::linear, m, k));
  RmsNormQuantizeArgs r;
  r.in = hidden.data(), r.rows = m, r.k = k, r.weight = norm_weight.data(), r.eps = 1e-5f;
  r.out.data = x_ref.data(), r.out.scales = xs_ref.data(), r.out.global_scale.value = 1.0f;
  r.normed = normed.data();
  cpu::rmsnorm_quantize(r);  // with a provisional scale, for the amax
  float amax = 0;
  for (uint16_t h : normed) amax = std::max(amax, std::fabs(from_bf16(h)));
  const float input_scale = amax / 2688.0f;
  r.out.global_scale.value = input_scale;
  cpu::rmsnorm_quantize(r);  // the reference activations

  void *d_weight = upload(weight), *d_weight_scale = upload(weight_scale), *d_hidden = upload(hidden),
       *d_norm_weight = upload(norm_weight), *d_ws2 = upload(std::vector<float>{weight_scale_2}),
       *d_in_scale = upload(std::vector<float>{input_scale}), *d_swizzled = nullptr, *d_x = nullptr, *d_xs = nullptr,
       *d_y = nullptr;
  if (!d_weight || !d_weight_scale || !d_hidden || !d_norm_weight || !d_ws2 || !d_in_scale) return 2;
  CUDA_OK(cudaMalloc(&d_swizzled, scale_bytes(ScaleLayout::swizzled128x4, n, k)));
  CUDA_OK(cudaMalloc(&d_x, x_ref.size()));
  CUDA_OK(cudaMalloc(&d_xs, xs_ref.size()));
  CUDA_OK(cudaMalloc(&d_y, m * n * 2));
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreate(&stream));

  std::vector<uint8_t> x_got(x_ref.size()), xs_got(xs_ref.size());
  std::vector<uint16_t> y(m * n);
  try {
    ModelOptLinear layer;
    layer.n = n, layer.k = k, layer.weight = d_weight, layer.weight_scale = d_weight_scale;
    layer.weight_scale_2.device_ptr = static_cast<const float*>(d_ws2);
    layer.input_scale.device_ptr = static_cast<const float*>(d_in_scale);
    const Nvfp4Linear lin = from_modelopt(layer, ScaleLayout::swizzled128x4, d_swizzled, stream);

    RmsNormQuantizeArgs q = r;
    q.in = d_hidden, q.weight = d_norm_weight, q.normed = nullptr;
    q.out.data = d_x, q.out.scales = d_xs, q.out.global_scale = lin.input_scale;
    rmsnorm_quantize(q, stream);

    GemmArgs g;
    g.m = m, g.n = n, g.k = k, g.b = lin.weight, g.d = d_y;
    g.a_dtype = DType::nvfp4;
    g.a_fp4 = {d_x, 0, d_xs, ScaleLayout::linear, lin.input_scale};
    gemm(g, stream);  // no workspace given: allocated on the stream
  } catch (const Error& e) {
    std::fprintf(stderr, "failed: %s\n", e.what());
    return 2;
  }
  CUDA_OK(cudaMemcpyAsync(x_got.data(), d_x, x_got.size(), cudaMemcpyDeviceToHost, stream));
  CUDA_OK(cudaMemcpyAsync(xs_got.data(), d_xs, xs_got.size(), cudaMemcpyDeviceToHost, stream));
  CUDA_OK(cudaMemcpyAsync(y.data(), d_y, y.size() * 2, cudaMemcpyDeviceToHost, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  const bool same = x_got == x_ref && xs_got == xs_ref;

  // Reference GEMM: both operands decoded on the CPU (fp32, exact), products in float64.
  std::vector<float> a_dec(m * k), w_dec(n * k);
  DequantizeArgs d;
  d.src = {x_ref.data(), 0, xs_ref.data(), ScaleLayout::linear, {input_scale, nullptr, false}};
  d.src_rows = m, d.k = k, d.out = a_dec.data(), d.out_dtype = DType::fp32;
  cpu::dequantize(d);
  d.src = {weight.data(), 0, weight_scale.data(), ScaleLayout::linear, {weight_scale_2, nullptr, false}};
  d.src_rows = n, d.out = w_dec.data();
  cpu::dequantize(d);
  const double rel = example::relative_error(a_dec, w_dec, y, m, n, k);
  const bool ok = same && rel <= example::kBf16OutputBound;
  std::printf("W4A4 M=%ld N=%ld K=%ld: rmsnorm_quantize %s the CPU reference; gemm relative Frobenius error %.2e "
              "against float64 %s\n",
              m, n, k, same ? "bit-identical with" : "DIFFERS from", rel, ok ? "(ok)" : "(FAILED)");
  for (void* p : {d_weight, d_weight_scale, d_hidden, d_norm_weight, d_ws2, d_in_scale, d_swizzled, d_x, d_xs, d_y})
    cudaFree(p);
  cudaStreamDestroy(stream);
  return ok ? 0 : 1;
}
