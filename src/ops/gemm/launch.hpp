// A GEMM kernel loaded and planned for one M, and its launch with a call's pointers.
#pragma once
#include <cuda.h>

#include <cstdint>
#include <string>

#include "core/launcher.hpp"
#include "ops/gemm/backend.hpp"
#include "ops/gemm/call.hpp"

namespace nvfp4::jit::detail {

struct GemmKernel {
  const GemmBackend* backend = nullptr;
  GemmSpec spec;
  CUfunction function = nullptr;
  GemmPlan plan;
  bool decodes_a = false;  // W4A4 on a backend without an FP4 MMA: the BF16 kernel, on A decoded first
  bool gathers_a = false;  // W4A16 through row_index: the kernel on A's rows gathered first (gathers_rows_first)
  CUfunction activations = nullptr;  // the activation pass's kernel (W4A8's, or the row gather), loaded with the GEMM's
};

// The command that builds a GEMM call's kernels for `device` ahead of time (its shape, SM count
// and variant: dtypes, bias, layouts), named in capture errors.
std::string gemm_prewarm_hint(const GemmCall& call, const DeviceInfo& device);

// The kernel of `spec` loaded in the device's context (from memory, disk or NVRTC; never while
// `stream` is capturing) and planned for m rows.
GemmKernel load_gemm_kernel(const DeviceInfo& device, const GemmBackend& backend, const GemmSpec& spec, int64_t m,
                            CUstream stream, const GemmCall& call);

// `kernel` with the kernel of the pass `call` runs before it loaded too (W4A8's activation pass,
// fp8_activations_op.hpp; the row gather where gathers_rows_first, gather_rows_op.hpp), before
// anything is enqueued: a capture error leaves the stream untouched. Unchanged for other calls.
GemmKernel with_activation_pass(GemmKernel kernel, const DeviceInfo& device, const GemmCall& call, CUstream stream);

// Binds the call's pointers into a copy of the plan's parameters and launches with the tensor
// maps the bind lists (each encoded once per thread and key), early where the caller promised
// static weights and the plan says it pays.
void launch_gemm(const GemmKernel& kernel, const GemmCall& call, CUstream stream);

}  // namespace nvfp4::jit::detail
