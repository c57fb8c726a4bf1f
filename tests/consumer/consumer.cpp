#include <cstdio>
#include <cstring>

#include <nvfp4/jit.hpp>

int main() {
  nvfp4::jit::DequantizeArgs args;
  args.k = 24;  // not a multiple of 16: must be rejected before touching the GPU
  try {
    nvfp4::jit::dequantize(args, nullptr);
  } catch (const nvfp4::jit::Error& e) {
    std::printf("nvfp4-jit %s: %s\n", nvfp4::jit::version(), e.what());
    return std::strstr(e.what(), "k = 24") ? 0 : 1;
  }
  return 1;
}
