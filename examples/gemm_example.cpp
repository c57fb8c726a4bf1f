// Quantize a random BF16 weight [N, K] to NVFP4 on the CPU (as an offline checkpoint step
// would), load it as a ModelOpt layer (load_modelopt: prepacked on sm_90a, as stored on
// Blackwell), multiply BF16 activations [M, K] by it on the GPU with nvfp4::jit::gemm, and check
// the result against a float64 product of the dequantized weight. Public API + CUDA runtime.
//
//   gemm_example [M N K]      exit 0: within the BF16 output bound; 1: too far; 2: no GPU / error
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "example_util.hpp"
#include "nvfp4/jit.hpp"

using example::from_bf16;
using example::to_bf16;

int main(int argc, char** argv) {
  const long m = argc > 3 ? std::atol(argv[1]) : 16, n = argc > 3 ? std::atol(argv[2]) : 4096,
             k = argc > 3 ? std::atol(argv[3]) : 4096;
  if (!example::first_gpu()) return 2;
  std::mt19937 rng(std::random_device{}());
  std::normal_distribution<float> normal(0.0f, 1.0f);

  // The weight, quantized on the CPU: packed [N, K/2], linear E4M3 scales, per-tensor global scale.
  std::vector<uint16_t> w(n * k), a(m * k);
  for (auto& x : w) x = to_bf16(0.02f * normal(rng));
  for (auto& x : a) x = to_bf16(normal(rng));
  std::vector<uint8_t> packed(n * k / 2), scales(nvfp4::jit::scale_bytes(nvfp4::jit::ScaleLayout::linear, n, k));
  float global_scale = 0;
  nvfp4::jit::QuantizeArgs q;
  q.in = w.data();
  q.rows = n;
  q.k = k;
  q.out = packed.data();
  q.scales = scales.data();
  q.scale_mode = nvfp4::jit::GlobalScaleMode::compute_per_tensor;
  q.global_scale_out = &global_scale;
  nvfp4::jit::cpu::quantize(q);

  void *d_a = example::upload(a), *d_packed = example::upload(packed), *d_scales = example::upload(scales), *d_out,
       *d_prepacked;
  if (!d_a || !d_packed || !d_scales) return 2;
  CUDA_OK(cudaMalloc(&d_out, m * n * 2));
  CUDA_OK(cudaMalloc(&d_prepacked, nvfp4::jit::prepacked_bytes(n, k)));
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreate(&stream));

  nvfp4::jit::ModelOptLinear layer;  // the checkpoint's tensors, on the device
  layer.n = n, layer.k = k;
  layer.weight = d_packed;
  layer.weight_scale = d_scales;
  layer.weight_scale_2.value = global_scale;
  nvfp4::jit::GemmArgs g;
  g.m = m, g.n = n, g.k = k;
  g.a = d_a;
  g.d = d_out;
  try {
    const nvfp4::jit::Nvfp4Linear lin = nvfp4::jit::load_modelopt(layer, d_prepacked, stream);  // once, at load
    g.b = lin.weight;
    g.b_prepacked = lin.prepacked;
    nvfp4::jit::gemm(g, stream);  // first call: compile or load from the disk cache
  } catch (const nvfp4::jit::Error& e) {
    std::fprintf(stderr, "gemm failed: %s\n", e.what());
    return 2;
  }
  std::vector<uint16_t> got(m * n);
  CUDA_OK(cudaMemcpyAsync(got.data(), d_out, got.size() * 2, cudaMemcpyDeviceToHost, stream));
  CUDA_OK(cudaStreamSynchronize(stream));

  // Reference: the dequantized weight (CPU reference, fp32) times the activations in float64.
  std::vector<float> wq(n * k);
  nvfp4::jit::DequantizeArgs dq;
  dq.src = {packed.data(), 0, scales.data(), nvfp4::jit::ScaleLayout::linear, {global_scale, nullptr, false}};
  dq.src_rows = n;
  dq.k = k;
  dq.out = wq.data();
  dq.out_dtype = nvfp4::jit::DType::fp32;
  nvfp4::jit::cpu::dequantize(dq);
  std::vector<float> af(a.size());
  for (size_t i = 0; i < a.size(); ++i) af[i] = from_bf16(a[i]);
  const double rel = example::relative_error(af, wq, got, m, n, k);
  const bool ok = rel <= example::kBf16OutputBound;
  std::printf("gemm M=%ld N=%ld K=%ld (BF16 x NVFP4 -> BF16, weight %s): relative Frobenius error %.2e against float64 %s\n",
              m, n, k, g.b_prepacked ? "prepacked" : "as stored", rel, ok ? "(ok)" : "(TOO LARGE)");
  cudaFree(d_a);
  cudaFree(d_packed);
  cudaFree(d_scales);
  cudaFree(d_prepacked);
  cudaFree(d_out);
  cudaStreamDestroy(stream);
  return ok ? 0 : 1;
}
