#include "core/launcher.hpp"

#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "core/driver.hpp"
#include "core/error.hpp"
#include "core/kernel_store.hpp"
#include "core/op_registry.hpp"

namespace nvfp4::jit::detail {

struct ContextState {
  DeviceInfo info;
  std::shared_mutex mutex;
  std::unordered_map<KernelSpec, CUfunction, KernelSpecHash> functions;
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
    check_cu(d.cuCtxGetDevice(&info.device), "cuCtxGetDevice");
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

CUfunction find_kernel(const DeviceInfo& device, const KernelSpec& spec) {
  ContextState& state = *device.state;
  std::shared_lock lock(state.mutex);
  const auto it = state.functions.find(spec);
  return it == state.functions.end() ? nullptr : it->second;
}

CUfunction load_kernel(const DeviceInfo& device, const KernelSpec& spec, unsigned shared_bytes, CUstream stream,
                       const std::string& prewarm_hint) {
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

namespace {
thread_local bool load_only_mode = false;
}  // namespace

LoadOnlyScope::LoadOnlyScope() : outer_(load_only_mode) { load_only_mode = true; }
LoadOnlyScope::~LoadOnlyScope() { load_only_mode = outer_; }
bool load_only() noexcept { return load_only_mode; }

void launch(CUfunction function, const LaunchShape& shape, CUstream stream, void** params) {
  if (load_only_mode) return;
  CUlaunchAttribute attributes[2]{};
  CUlaunchConfig config{};
  config.gridDimX = shape.grid[0];
  config.gridDimY = shape.grid[1];
  config.gridDimZ = shape.grid[2];
  config.blockDimX = shape.block[0];
  config.blockDimY = shape.block[1];
  config.blockDimZ = shape.block[2];
  config.sharedMemBytes = shape.shared_bytes;
  config.hStream = stream;
  config.attrs = attributes;
  if (shape.cluster[0]) {
    CUlaunchAttribute& a = attributes[config.numAttrs++];
    a.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    a.value.clusterDim.x = shape.cluster[0];
    a.value.clusterDim.y = shape.cluster[1];
    a.value.clusterDim.z = shape.cluster[2];
  }
  if (shape.programmatic) {
    CUlaunchAttribute& a = attributes[config.numAttrs++];
    a.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    a.value.programmaticStreamSerializationAllowed = 1;
  }
  check_cu(driver().cuLaunchKernelEx(&config, function, params, nullptr), "cuLaunchKernelEx");
}

namespace {

// A tiled TMA descriptor of `rank` (2 or 3) dimensions, innermost first.
CUtensorMap make_tensor_map(int rank, const void* base, CUtensorMapDataType type, const uint64_t (&dims)[3],
                            const uint64_t (&strides)[2], const uint32_t (&box)[3], CUtensorMapSwizzle swizzle) {
  if (load_only_mode) return CUtensorMap{};
  // A descriptor depends on its arguments only, and a serving loop passes the same weights and
  // buffers again and again: the last few encodings of this thread are reused, so a warm call
  // costs a comparison instead of a driver call.
  struct Entry {
    const void* base;
    uint64_t dims[3], strides[2];
    uint32_t box[3];
    int rank, type, swizzle;
    bool operator==(const Entry&) const = default;
  };
  constexpr int kEntries = 16;  // a layer's GEMMs: activations and outputs
  thread_local Entry keys[kEntries] = {};
  thread_local CUtensorMap maps[kEntries];
  thread_local int next = 0;
  const Entry key{base, {dims[0], dims[1], dims[2]}, {strides[0], strides[1]}, {box[0], box[1], box[2]}, rank,
                  int(type), int(swizzle)};
  for (int i = 0; i < kEntries; ++i)
    if (keys[i] == key && key.base) return maps[i];

  CUtensorMap map{};
  const cuuint64_t d[3] = {dims[0], dims[1], dims[2]};
  const cuuint64_t st[2] = {strides[0], strides[1]};
  const cuuint32_t b[3] = {box[0], box[1], box[2]};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  check_cu(driver().cuTensorMapEncodeTiled(&map, type, cuuint32_t(rank), const_cast<void*>(base), d, st, b,
                                           element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                                           CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
           "cuTensorMapEncodeTiled");
  keys[next] = key;
  maps[next] = map;
  next = (next + 1) % kEntries;
  return map;
}

}  // namespace

CUtensorMap make_tensor_map_2d(const void* base, CUtensorMapDataType type, uint64_t rows, uint64_t cols,
                               uint64_t row_stride_bytes, uint32_t box_rows, uint32_t box_cols,
                               CUtensorMapSwizzle swizzle) {
  return make_tensor_map(2, base, type, {cols, rows, 1}, {row_stride_bytes, 0}, {box_cols, box_rows, 1}, swizzle);
}

CUtensorMap make_tensor_map_3d(const void* base, CUtensorMapDataType type, uint64_t groups, uint64_t rows,
                               uint64_t cols, uint64_t row_stride_bytes, uint64_t group_stride_bytes, uint32_t box_rows,
                               uint32_t box_cols, CUtensorMapSwizzle swizzle) {
  return make_tensor_map(3, base, type, {cols, rows, groups}, {row_stride_bytes, group_stride_bytes},
                         {box_cols, box_rows, 1}, swizzle);
}

}  // namespace nvfp4::jit::detail
