// The ops a KernelSpec can name, as the core sees them: each op registers how its kernels are
// generated and named and which of them a prewarm compiles. The core dispatches through this
// table and includes no op's header.
#pragma once
#include <string>
#include <vector>

#include "core/codegen.hpp"
#include "core/manifest.hpp"
#include "core/spec.hpp"

namespace nvfp4::jit::detail {

struct OpKernels {
  GeneratedKernel (*generate)(const KernelSpec& spec) = nullptr;
  // The entry point's name, without generating the source (messages on the hot path's refusals).
  std::string (*kernel_name)(const KernelSpec& spec) = nullptr;
  // Ops with tuned tiles: why a tuning entry (a problem, its M bucket, a tile) is not one the op
  // can run; empty when it is. Null: the op has no tuned tiles.
  std::string (*tuned_tile_problem)(const KernelSpec& problem, int m_bucket, const TileConfig& tile) = nullptr;
  // The dynamic shared memory every launch of the kernel takes, from its spec alone: a kernel
  // is loaded allowing it, by its first call or by a prewarm. Null: none.
  unsigned (*shared_bytes)(const KernelSpec& spec) = nullptr;
};

// Every kernel an op needs for one weight shape on `arch`, GEMM tiles picked for `sm_count` SMs.
using PrewarmExpansion = std::vector<KernelSpec> (*)(Arch arch, const WeightShape& shape, int sm_count);

// Called from a static initializer of the op's own source file. Returns true (for that
// initializer to hold).
bool register_op(Op op, OpKernels kernels);
// `order` sorts the expansions, so a prewarm's list does not depend on link order.
bool register_prewarm(int order, PrewarmExpansion expansion);

// Throws Error(internal) for an op nothing registered.
const OpKernels& op_kernels(Op op);
std::vector<PrewarmExpansion> prewarm_expansions();

}  // namespace nvfp4::jit::detail
