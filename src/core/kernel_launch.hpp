// Launching a loaded kernel on the caller's stream (cuLaunchKernelEx), with the TMA descriptors
// its parameters take, and the thread's load-only mode, in which nothing is launched.
#pragma once
#include <cuda.h>

#include "core/tensor_map.hpp"

namespace nvfp4::jit::detail {

struct LaunchShape {
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned shared_bytes = 0;
  unsigned cluster[3] = {0, 0, 0};  // 0: no cluster
  bool programmatic = false;         // may start before the previous kernel on the stream ends
};

// Launches `function` (nothing in load-only mode).
void launch(CUfunction function, const LaunchShape& shape, CUstream stream, void** params);
// The same, `maps`' descriptors first written into the parameter block (each encoded once per
// thread and key: the thread's TensorMapCache).
void launch(CUfunction function, const LaunchShape& shape, CUstream stream, void** params, const TensorMapList& maps);

// ensure_loaded's mode, for the calling thread while a scope is alive: calls validate, compile
// and load their kernels as always, but launch nothing, allocate nothing and touch no memory,
// so pointers may be null (Check::not_null lets them pass, tensor maps are not encoded).
class LoadOnlyScope {
 public:
  LoadOnlyScope();
  ~LoadOnlyScope();
  LoadOnlyScope(const LoadOnlyScope&) = delete;
  LoadOnlyScope& operator=(const LoadOnlyScope&) = delete;

 private:
  bool outer_;
};
bool load_only() noexcept;

}  // namespace nvfp4::jit::detail
