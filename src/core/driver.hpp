// The CUDA driver API, loaded with dlopen("libcuda.so.1") at first use, so that codegen,
// NVRTC and the cache work on machines without a GPU.
#pragma once
#include <cuda.h>

#include <string>

namespace nvfp4::jit::detail {

struct Driver {
#define NVFP4_DRIVER_FUNCTIONS(X)                                                                        \
  X(cuInit) X(cuDriverGetVersion) X(cuGetErrorString) X(cuGetErrorName) X(cuDeviceGetCount) X(cuDeviceGet) \
  X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease)       \
  X(cuCtxGetCurrent) X(cuCtxSetCurrent) X(cuCtxPushCurrent) X(cuCtxPopCurrent) X(cuCtxGetDevice) X(cuCtxGetId) X(cuCtxSynchronize)                 \
  X(cuModuleLoadData) X(cuModuleGetFunction) X(cuFuncSetAttribute) X(cuFuncGetAttribute)                    \
  X(cuLaunchKernelEx) X(cuLaunchKernel) X(cuStreamIsCapturing) X(cuStreamGetCtx) X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize)   \
  X(cuStreamBeginCapture) X(cuStreamEndCapture) X(cuGraphInstantiateWithFlags) X(cuGraphLaunch) X(cuGraphDestroy)   \
  X(cuGraphExecDestroy) X(cuGraphGetNodes) X(cuMemAlloc) X(cuMemFree) X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemcpyDtoDAsync)   \
  X(cuMemsetD8) X(cuMemsetD32Async) X(cuEventCreate) X(cuEventRecord) X(cuEventSynchronize) X(cuEventElapsedTime)              \
  X(cuEventDestroy) X(cuTensorMapEncodeTiled) X(cuMemAllocAsync) X(cuMemFreeAsync) \
  X(cuPointerGetAttributes)
#define NVFP4_DECLARE(name) decltype(&::name) name = nullptr;
  NVFP4_DRIVER_FUNCTIONS(NVFP4_DECLARE)
#undef NVFP4_DECLARE
};

// The loaded driver (cuInit done). Throws Error(cuda_error) when there is none.
const Driver& driver();
// Whether a driver can be loaded, and if not, why (no throw).
bool driver_available(std::string* why = nullptr);
// Throws Error(cuda_error) naming `what` unless `result` is CUDA_SUCCESS.
void check_cu(CUresult result, const char* what);

}  // namespace nvfp4::jit::detail
