// Loading compiled kernels into CUDA contexts and launching them on the caller's stream.
// Warm path: a thread-local context lookup, one shared-lock table lookup, cuLaunchKernelEx.
#pragma once
#include <cuda.h>

#include <cstdint>
#include <string>

#include "core/spec.hpp"

namespace nvfp4::jit::detail {

struct ContextState;

struct DeviceInfo {
  ContextState* state = nullptr;  // this context's loaded kernels
  CUcontext context = nullptr;
  uint64_t context_id = 0;
  CUdevice device = 0;
  Arch arch = Arch::sm_90a;
  int sm_count = 0;
};

struct LaunchShape {
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned shared_bytes = 0;
  unsigned cluster[3] = {0, 0, 0};  // 0: no cluster
  bool programmatic = false;         // may start before the previous kernel on the stream ends
};

// The calling thread's current context and its device. Throws Error(cuda_error) when no
// context is current, Error(unsupported) for a device we have no kernels for.
const DeviceInfo& current_device();

// The kernel of `spec` if it is loaded in the device's context, else null. The warm path:
// a shared-lock table lookup, no allocation.
CUfunction find_kernel(const DeviceInfo& device, const KernelSpec& spec);

// Loads the kernel of `spec` (compiling it or reading it from the disk cache) and allows it
// `shared_bytes` of dynamic shared memory. Never loads while `stream` is capturing: that
// throws Error(not_loaded_in_capture) naming `prewarm_hint`.
CUfunction load_kernel(const DeviceInfo& device, const KernelSpec& spec, unsigned shared_bytes, CUstream stream,
                       const std::string& prewarm_hint);

// find_kernel, else load_kernel with the hint `make_hint()` builds (only on that cold path).
template <class MakeHint>
CUfunction kernel_for(const DeviceInfo& device, const KernelSpec& spec, unsigned shared_bytes, CUstream stream,
                      MakeHint&& make_hint) {
  if (CUfunction f = find_kernel(device, spec)) return f;
  return load_kernel(device, spec, shared_bytes, stream, make_hint());
}

// ensure_loaded's mode, for the calling thread while a scope is alive: calls validate, compile
// and load their kernels as always, but launch nothing, allocate nothing and touch no memory,
// so pointers may be null (Check::not_null lets them pass, tensor maps are left empty).
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

// Launches `function` (nothing in load-only mode).
void launch(CUfunction function, const LaunchShape& shape, CUstream stream, void** params);

// A 2D TMA descriptor for a row-major [rows, cols] tensor of `element_bytes` elements (empty
// in load-only mode).
CUtensorMap make_tensor_map_2d(const void* base, CUtensorMapDataType type, uint64_t rows, uint64_t cols,
                               uint64_t row_stride_bytes, uint32_t box_rows, uint32_t box_cols,
                               CUtensorMapSwizzle swizzle);
// A 3D one for [groups] row-major [rows, cols] tensors at any row and group strides (boxes of one
// group's rows).
CUtensorMap make_tensor_map_3d(const void* base, CUtensorMapDataType type, uint64_t groups, uint64_t rows,
                               uint64_t cols, uint64_t row_stride_bytes, uint64_t group_stride_bytes, uint32_t box_rows,
                               uint32_t box_cols, CUtensorMapSwizzle swizzle);

}  // namespace nvfp4::jit::detail
