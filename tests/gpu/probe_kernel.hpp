// A probe kernel named `probe`, compiled by NVRTC for the current GPU from a source that
// includes the templates: the tests that check device functions on the device itself.
#pragma once
#include <array>

#include "core/driver.hpp"
#include "core/gpu_util.hpp"
#include "core/launcher.hpp"
#include "core/nvrtc_compiler.hpp"

inline CUfunction load_probe(const char* source) {
  using namespace nvfp4::jit::detail;
  const auto cubin = nvrtc_compile({"probe", source}, current_device().arch);
  CUmodule module = nullptr;
  CUfunction fn = nullptr;
  check_cu(driver().cuModuleLoadData(&module, cubin.data()), "cuModuleLoadData");
  check_cu(driver().cuModuleGetFunction(&fn, module, "probe"), "cuModuleGetFunction");
  return fn;
}

// Runs a probe over `threads` threads (a multiple of 256, 256 a CTA) with these arguments and
// waits for it.
template <class... Args>
void run_probe(CUfunction fn, unsigned threads, Args... args) {
  using namespace nvfp4::jit::detail;
  void* params[] = {&args...};
  LaunchShape shape;
  shape.grid[0] = threads / 256;
  shape.block[0] = 256;
  launch(fn, shape, nullptr, params);
  check_cu(driver().cuCtxSynchronize(), "probe");
}

// Runs a probe whose one argument is four 64-bit counters, zeroed first, and returns them.
inline std::array<unsigned long long, 4> run_counting_probe(const char* source, unsigned threads) {
  using namespace nvfp4::jit::detail;
  DeviceBuffer counts(4 * sizeof(unsigned long long));
  counts.fill(0);
  run_probe(load_probe(source), threads, counts.as<unsigned long long>());
  std::array<unsigned long long, 4> got{};
  counts.download(got.data(), sizeof got);
  return got;
}
