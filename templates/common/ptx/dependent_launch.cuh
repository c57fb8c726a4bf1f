// Programmatic dependent launch (sm_90 and later). launch_dependents lets the next kernel on
// the stream, when launched with programmatic stream serialization (GemmArgs::weights_static),
// start once every CTA here has said so or exited; wait blocks until the previous kernel has
// completed and its memory is visible (at once when this kernel was launched without that
// attribute).
#pragma once

namespace nvfp4k {

__device__ __forceinline__ void griddep_launch_dependents() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ void griddep_wait() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

}  // namespace nvfp4k
