// The CUDA context a call runs in and the kernels loaded in it (launches: core/kernel_launch.hpp).
// Warm path: a thread-local context lookup, one shared-lock table lookup.
#pragma once
#include <cuda.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/kernel_launch.hpp"
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

// The calling thread's current context and its device. Throws Error(cuda_error) when no
// context is current, Error(unsupported) for a device we have no kernels for.
const DeviceInfo& current_device();

// The context a call on `stream` runs in, as cuBLAS and torch choose it: the stream's own.
//  - A context is current and owns the stream (or the stream is a legacy one: nullptr,
//    CU_STREAM_LEGACY, CU_STREAM_PER_THREAD): that context.
//  - A context is current and the stream belongs to another: the stream's context, pushed for
//    the call's length (kernels load and launch in the context that owns the stream).
//  - No context is current: the stream's context, or for a legacy stream the primary context
//    of device 0 (retained once, never released: what the CUDA runtime gives a fresh thread).
//    The thread adopts it: it stays current after the call, as the runtime leaves it, so the
//    thread's later calls take the first rule.
// A stream of another device than the output's is refused (Error(invalid_argument) naming
// `stream`): the output pointer's device is checked on a thread's first call with a (current
// context, stream) pair and on every call whose stream's context is not the current one, never
// on the warm path. The warm path costs what it did (cuCtxGetCurrent, cuCtxGetId) and a
// thread-local lookup of the pair; cuStreamGetCtx runs once per pair. (A stream handle that
// is destroyed and reused for a stream of another context while the pair stays cached
// launches with the first context's kernels: the driver refuses that launch.)
class CallDevice {
 public:
  CallDevice(CUstream stream, const void* out, const char* who);
  ~CallDevice() {
    if (pushed_) pop_context();
  }
  CallDevice(const CallDevice&) = delete;
  CallDevice& operator=(const CallDevice&) = delete;
  const DeviceInfo& info;

 private:
  explicit CallDevice(std::pair<const DeviceInfo*, bool> found);
  static void pop_context() noexcept;  // (the push succeeded, so does its pop)
  bool pushed_;
};

bool is_legacy_stream(CUstream stream) noexcept;

// The rule above as a table (the CPU tests check it). `owner_is_current`: the stream's
// context is the current one (only asked when a context is current and the stream is not legacy).
struct ContextRule {
  enum Source : uint8_t { current, stream_owner, primary_of_device_0 };
  Source source = current;
  bool adopt = false;  // make it current on the thread and leave it there
  bool push = false;   // current for the call only
  friend bool operator==(const ContextRule&, const ContextRule&) = default;
};
ContextRule context_rule(bool has_current, bool legacy_stream, bool owner_is_current);

// The kernel of `spec` if it is loaded in the device's context, else null. The warm path:
// a shared-lock table lookup, no allocation.
CUfunction find_kernel(const DeviceInfo& device, const KernelSpec& spec);

// Loads the kernel of `spec` (compiling it or reading it from the disk cache) and allows it
// the dynamic shared memory its op registers for the spec. Never loads while `stream` is
// capturing: that throws Error(not_loaded_in_capture) naming `prewarm_hint`.
CUfunction load_kernel(const DeviceInfo& device, const KernelSpec& spec, CUstream stream, const std::string& prewarm_hint);

// find_kernel, else load_kernel with the hint `make_hint()` builds (only on that cold path).
template <class MakeHint>
CUfunction kernel_for(const DeviceInfo& device, const KernelSpec& spec, CUstream stream, MakeHint&& make_hint) {
  if (CUfunction f = find_kernel(device, spec)) return f;
  return load_kernel(device, spec, stream, make_hint());
}

// For the calling thread while a scope is alive: the op fronts run on a device of `arch` and
// `sm_count` SMs that is not there (no driver call, no tuning table: the heuristic's tiles), in
// load-only mode, and the specs of the kernels they would load are recorded instead. What a
// call asks for, checked on the CPU against what a prewarm compiles.
class SpecRecordScope {
 public:
  SpecRecordScope(Arch arch, int sm_count);
  ~SpecRecordScope();
  SpecRecordScope(const SpecRecordScope&) = delete;
  SpecRecordScope& operator=(const SpecRecordScope&) = delete;
  const std::vector<KernelSpec>& specs() const;  // in call order, repeats kept

 private:
  std::unique_ptr<ContextState> state_;
  LoadOnlyScope load_only_;
  ContextState* outer_;
};
// Whether `device` is a SpecRecordScope's.
bool records_specs(const DeviceInfo& device) noexcept;

}  // namespace nvfp4::jit::detail
