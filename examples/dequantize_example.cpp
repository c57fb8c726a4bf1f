// Dequantize a random NVFP4 weight [N, K] to BF16 on the GPU with nvfp4-jit and check every
// element against the library's CPU reference. Uses only the public API and the CUDA runtime.
//
//   dequantize_example [N K]      exit 0: all elements match; 1: mismatch; 2: no GPU / error
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "example_util.hpp"
#include "nvfp4/jit.hpp"

int main(int argc, char** argv) {
  const long n = argc > 2 ? std::atol(argv[1]) : 4096, k = argc > 2 ? std::atol(argv[2]) : 4096;
  if (!example::first_gpu()) return 2;

  // A random ModelOpt-style NVFP4 weight: packed E2M1 [N, K/2], E4M3 scales [N, K/16], fp32 global scale.
  std::mt19937 rng(std::random_device{}());
  std::vector<uint8_t> packed(n * k / 2), scales(n * k / 16);
  for (auto& b : packed) b = uint8_t(rng());
  for (auto& s : scales) s = uint8_t(0x20 + rng() % 0x40);
  const float global_scale = 0.0123f;

  void *d_packed = example::upload(packed), *d_scales = example::upload(scales), *d_out;
  if (!d_packed || !d_scales) return 2;
  CUDA_OK(cudaMalloc(&d_out, n * k * 2));
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreate(&stream));

  nvfp4::jit::DequantizeArgs args;
  args.src.data = d_packed;
  args.src.scales = d_scales;
  args.src.global_scale.value = global_scale;
  args.src_rows = n;
  args.k = k;
  args.out = d_out;
  args.out_dtype = nvfp4::jit::DType::bf16;
  try {
    nvfp4::jit::dequantize(args, stream);  // first call: compile or load from the disk cache
  } catch (const nvfp4::jit::Error& e) {
    std::fprintf(stderr, "dequantize failed: %s\n", e.what());
    return 2;
  }
  std::vector<uint16_t> got(n * k), want(n * k);
  CUDA_OK(cudaMemcpyAsync(got.data(), d_out, got.size() * 2, cudaMemcpyDeviceToHost, stream));
  CUDA_OK(cudaStreamSynchronize(stream));

  args.src.data = packed.data();
  args.src.scales = scales.data();
  args.out = want.data();
  nvfp4::jit::cpu::dequantize(args);
  for (long i = 0; i < n * k; ++i)
    if (got[i] != want[i]) {
      std::printf("dequantize N=%ld K=%ld: MISMATCH at (%ld, %ld): 0x%04x != 0x%04x\n", n, k, i / k, i % k, got[i], want[i]);
      return 1;
    }
  std::printf("dequantize N=%ld K=%ld -> bf16: all %ld elements match the CPU reference\n", n, k, n * k);
  cudaFree(d_packed);
  cudaFree(d_scales);
  cudaFree(d_out);
  cudaStreamDestroy(stream);
  return 0;
}
