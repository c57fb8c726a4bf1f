#include "core/kernel_launch.hpp"

#include "core/driver.hpp"

namespace nvfp4::jit::detail {

namespace {

thread_local bool load_only_mode = false;

void launch_ex(CUfunction function, const LaunchShape& shape, CUstream stream, void** params) {
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

}  // namespace

void launch(CUfunction function, const LaunchShape& shape, CUstream stream, void** params) {
  if (!load_only_mode) launch_ex(function, shape, stream, params);
}

void launch(CUfunction function, const LaunchShape& shape, CUstream stream, void** params, const TensorMapList& maps) {
  if (load_only_mode) return;
  // per thread, as the GEMM front's warm table: no lock on the warm path
  thread_local TensorMapCache tensor_maps;
  tensor_maps.write(maps);
  launch_ex(function, shape, stream, params);
}

LoadOnlyScope::LoadOnlyScope() : outer_(load_only_mode) { load_only_mode = true; }
LoadOnlyScope::~LoadOnlyScope() { load_only_mode = outer_; }
bool load_only() noexcept { return load_only_mode; }

}  // namespace nvfp4::jit::detail
