#include "core/launcher.hpp"

#include <atomic>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

#include "core/driver.hpp"
#include "core/error.hpp"
#include "core/kernel_store.hpp"
#include "core/op_registry.hpp"

namespace nvfp4::jit::detail {

struct ContextState {
  DeviceInfo info;
  std::shared_mutex mutex;
  std::unordered_map<KernelSpec, CUfunction, KernelSpecHash> functions;
  std::vector<KernelSpec> recorded;  // a SpecRecordScope's: every spec asked for
  bool records = false;
};

namespace {

struct Contexts {
  std::mutex mutex;
  std::unordered_map<uint64_t, std::unique_ptr<ContextState>> by_id;  // never shrinks
};

Contexts& contexts() {
  static Contexts* all = new Contexts;  // leaked: kernels may be launched during static destruction
  return *all;
}

ContextState& context_state(CUcontext ctx, uint64_t id) {
  Contexts& all = contexts();
  std::lock_guard lock(all.mutex);
  auto& slot = all.by_id[id];
  if (!slot) {
    const Driver& d = driver();
    auto state = std::make_unique<ContextState>();
    DeviceInfo& info = state->info;
    info.state = state.get();
    info.context = ctx;
    info.context_id = id;
    // ctx need not be current on this thread (a stream's context, or one about to be adopted):
    // its device is asked with it current for the moment.
    check_cu(d.cuCtxPushCurrent(ctx), "cuCtxPushCurrent");
    const CUresult got = d.cuCtxGetDevice(&info.device);
    CUcontext popped = nullptr;
    d.cuCtxPopCurrent(&popped);
    check_cu(got, "cuCtxGetDevice");
    int major = 0, minor = 0;
    check_cu(d.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, info.device), "cuDeviceGetAttribute");
    check_cu(d.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, info.device), "cuDeviceGetAttribute");
    check_cu(d.cuDeviceGetAttribute(&info.sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, info.device), "cuDeviceGetAttribute");
    const auto arch = arch_for_compute_capability(major, minor);
    if (!arch)
      fail(Status::unsupported, "device compute capability {}.{} is not supported: nvfp4-jit targets sm_90a, sm_100a, "
           "sm_103a, sm_120a and sm_121a", major, minor);
    info.arch = *arch;
    slot = std::move(state);
  }
  return *slot;
}

}  // namespace

const DeviceInfo& current_device() {
  const Driver& d = driver();
  CUcontext ctx = nullptr;
  check_cu(d.cuCtxGetCurrent(&ctx), "cuCtxGetCurrent");
  if (!ctx) fail(Status::cuda_error, "no CUDA context is current on this thread (call cudaSetDevice or cuCtxSetCurrent first)");
  unsigned long long id = 0;
  check_cu(d.cuCtxGetId(ctx, &id), "cuCtxGetId");
  // Context ids are never reused, so a cached state can never belong to a dead context.
  thread_local const ContextState* last = nullptr;
  if (!last || last->info.context_id != id) last = &context_state(ctx, id);
  return last->info;
}

bool is_legacy_stream(CUstream stream) noexcept {
  return stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD;
}

ContextRule context_rule(bool has_current, bool legacy_stream, bool owner_is_current) {
  if (!has_current)
    return {legacy_stream ? ContextRule::primary_of_device_0 : ContextRule::stream_owner, true, false};
  if (legacy_stream || owner_is_current) return {ContextRule::current, false, false};
  return {ContextRule::stream_owner, false, true};
}

namespace {

// Device 0's primary context, retained on first use and kept for the process (kernels loaded
// in it stay valid; the runtime shares it).
CUcontext primary_context_of_device_0() {
  static const CUcontext ctx = [] {
    const Driver& d = driver();
    CUdevice dev = 0;
    check_cu(d.cuDeviceGet(&dev, 0), "cuDeviceGet(0)");
    CUcontext c = nullptr;
    check_cu(d.cuDevicePrimaryCtxRetain(&c, dev), "cuDevicePrimaryCtxRetain(device 0)");
    return c;
  }();
  return ctx;
}

ContextState& state_of(CUcontext ctx) {
  unsigned long long id = 0;
  check_cu(driver().cuCtxGetId(ctx, &id), "cuCtxGetId");
  return context_state(ctx, id);
}

// Refuses `out` when it is device memory of another device than the call's.
void check_output_device(const DeviceInfo& device, const void* out, const char* who) {
  if (!out || load_only()) return;
  unsigned memory_type = 0;
  int ordinal = -1;
  int managed = 0;
  CUpointer_attribute attributes[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                      CU_POINTER_ATTRIBUTE_IS_MANAGED};
  void* values[] = {&memory_type, &ordinal, &managed};
  // (memory the driver does not know, host or managed memory: left to the op's own checks)
  if (driver().cuPointerGetAttributes(3, attributes, values, CUdeviceptr(out)) != CUDA_SUCCESS) return;
  if (memory_type != CU_MEMORYTYPE_DEVICE || managed || ordinal < 0 || ordinal == int(device.device)) return;
  fail(Status::invalid_argument,
       "{}: `stream` belongs to device {} but the output is memory of device {}: give a stream of the output's "
       "device", who, int(device.device), ordinal);
}

// The (current context, stream) pairs this thread has seen, and the state of the context
// each runs in.
struct StreamEntry {
  uint64_t current_id = 0;
  CUstream stream = nullptr;
  ContextState* state = nullptr;
};
constexpr int kStreamEntries = 8;  // an engine's few streams
thread_local StreamEntry stream_entries[kStreamEntries];
thread_local int next_stream_entry = 0;

}  // namespace

namespace {
thread_local ContextState* recording = nullptr;  // the innermost SpecRecordScope's
}  // namespace

CallDevice::CallDevice(CUstream stream, const void* out, const char* who)
    : CallDevice([&]() -> std::pair<const DeviceInfo*, bool> {
        if (recording) return {&recording->info, false};
        const Driver& d = driver();
        CUcontext current = nullptr;
        check_cu(d.cuCtxGetCurrent(&current), "cuCtxGetCurrent");
        const bool legacy = is_legacy_stream(stream);
        unsigned long long current_id = 0;
        if (current) {
          check_cu(d.cuCtxGetId(current, &current_id), "cuCtxGetId");
          for (const StreamEntry& e : stream_entries)
            if (e.state && e.current_id == current_id && e.stream == stream) {
              const DeviceInfo& info = e.state->info;
              if (info.context_id == current_id) return {&info, false};  // the warm path
              check_output_device(info, out, who);
              check_cu(d.cuCtxPushCurrent(info.context), "cuCtxPushCurrent");
              return {&info, true};
            }
        }
        CUcontext owner = nullptr;
        if (!legacy) check_cu(d.cuStreamGetCtx(stream, &owner), "cuStreamGetCtx");
        const ContextRule rule = context_rule(current != nullptr, legacy, owner == current);
        CUcontext ctx = rule.source == ContextRule::current      ? current
                        : rule.source == ContextRule::stream_owner ? owner
                                                                   : primary_context_of_device_0();
        ContextState& state = state_of(ctx);
        check_output_device(state.info, out, who);
        if (rule.adopt) {
          check_cu(d.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
          current_id = state.info.context_id;
        }
        StreamEntry& slot = stream_entries[next_stream_entry];
        slot = {current_id, stream, &state};
        next_stream_entry = (next_stream_entry + 1) % kStreamEntries;
        if (rule.push) check_cu(d.cuCtxPushCurrent(ctx), "cuCtxPushCurrent");
        return {&state.info, rule.push};
      }()) {}

CallDevice::CallDevice(std::pair<const DeviceInfo*, bool> found) : info(*found.first), pushed_(found.second) {}

void CallDevice::pop_context() noexcept {
  CUcontext popped = nullptr;
  driver().cuCtxPopCurrent(&popped);
}

CUfunction find_kernel(const DeviceInfo& device, const KernelSpec& spec) {
  ContextState& state = *device.state;
  if (state.records) {  // a stand-in function: load-only mode launches nothing
    state.recorded.push_back(spec);
    return reinterpret_cast<CUfunction>(&state);
  }
  std::shared_lock lock(state.mutex);
  const auto it = state.functions.find(spec);
  return it == state.functions.end() ? nullptr : it->second;
}

CUfunction load_kernel(const DeviceInfo& device, const KernelSpec& spec, CUstream stream, const std::string& prewarm_hint) {
  ContextState& state = *device.state;
  const Driver& d = driver();
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  const CUresult r = d.cuStreamIsCapturing(stream, &capture);
  if (r == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT || capture != CU_STREAM_CAPTURE_STATUS_NONE)
    fail(Status::not_loaded_in_capture,
         "kernel {} ({}) is not loaded in this CUDA context and the stream is capturing a graph; loading it now "
         "would break the capture. Make the same call once before capturing (after `{}` it loads from the disk "
         "cache in milliseconds)",
         op_kernels(spec.op).kernel_name(spec), spec.describe(), prewarm_hint);
  check_cu(r, "cuStreamIsCapturing");

  const auto compiled = KernelStore::instance().get(spec);
  std::unique_lock lock(state.mutex);
  if (auto it = state.functions.find(spec); it != state.functions.end()) return it->second;
  CUmodule module = nullptr;
  check_cu(d.cuModuleLoadData(&module, compiled->cubin.data()), "cuModuleLoadData");
  CUfunction function = nullptr;
  check_cu(d.cuModuleGetFunction(&function, module, compiled->kernel.name.c_str()), "cuModuleGetFunction");
  const OpKernels& kernels = op_kernels(spec.op);
  const unsigned shared_bytes = kernels.shared_bytes ? kernels.shared_bytes(spec) : 0;
  if (shared_bytes > 48 * 1024) {
    check_cu(d.cuFuncSetAttribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(shared_bytes)),
             "cuFuncSetAttribute(max dynamic shared memory)");
    // All of L1 as shared memory: as many CTAs per SM as their stages allow (the kernels
    // that stage this much read through TMA, not L1).
    check_cu(d.cuFuncSetAttribute(function, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                                  CU_SHAREDMEM_CARVEOUT_MAX_SHARED),
             "cuFuncSetAttribute(shared memory carveout)");
  }
  state.functions.emplace(spec, function);  // modules live as long as their context
  return function;
}

SpecRecordScope::SpecRecordScope(Arch arch, int sm_count) : state_(std::make_unique<ContextState>()), outer_(recording) {
  // an id no context has (the driver counts from 1), new for each scope: the GEMM front's
  // per-thread warm entries, keyed by it, never answer for a recording
  static std::atomic<uint64_t> next_id{uint64_t(1) << 63};
  DeviceInfo& info = state_->info;
  info.state = state_.get();
  info.context_id = next_id++;
  info.arch = arch;
  info.sm_count = sm_count;
  state_->records = true;
  recording = state_.get();
}
SpecRecordScope::~SpecRecordScope() { recording = outer_; }
const std::vector<KernelSpec>& SpecRecordScope::specs() const { return state_->recorded; }
bool records_specs(const DeviceInfo& device) noexcept { return device.state && device.state->records; }

}  // namespace nvfp4::jit::detail
