// The README's "C++ install" program: its own CUDA buffers (CUDA::cudart), one nvfp4-jit call.
// Built by check.sh (it links), run on a GPU machine.
#include <cstdio>
#include <cuda_runtime.h>
#include <nvfp4/jit.hpp>

int main() {
  const int n = 128, k = 64;                       // a weight [n, k]: E2M1 codes and E4M3 scales
  void *w, *scales, *out;
  if (cudaMalloc(&w, n * k / 2) != cudaSuccess || cudaMalloc(&scales, n * k / 16) != cudaSuccess ||
      cudaMalloc(&out, n * k * 2) != cudaSuccess) {
    std::printf("app: no GPU\n");
    return 1;
  }
  cudaMemset(w, 0x22, n * k / 2);                  // every code 1.0
  cudaMemset(scales, 0x38, n * k / 16);            // every scale 1.0
  nvfp4::jit::DequantizeArgs args;
  args.src.data = w;  args.src.scales = scales;  args.src.global_scale.value = 0.5f;
  args.src_rows = n;  args.k = k;
  args.out = out;  args.out_dtype = nvfp4::jit::DType::bf16;
  nvfp4::jit::dequantize(args, nullptr);
  unsigned short first = 0;
  cudaMemcpy(&first, out, sizeof first, cudaMemcpyDeviceToHost);
  std::printf("app: nvfp4-jit %s, first element 0x%04x (bf16 0.5 is 0x3f00)\n", nvfp4::jit::version(), first);
  return first == 0x3f00 ? 0 : 1;
}
