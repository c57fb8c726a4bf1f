// The ops a KernelSpec can name, as the core sees them: each op registers how its kernels are
// generated, named and described and which of them a prewarm compiles. The core dispatches
// through this table and includes no op's header.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/codegen.hpp"
#include "core/manifest.hpp"
#include "core/spec.hpp"

namespace nvfp4::jit::detail {

struct OpKernels {
  GeneratedKernel (*generate)(const KernelSpec& spec) = nullptr;
  // The entry point's name, without generating the source (messages on the hot path's refusals).
  std::string (*kernel_name)(const KernelSpec& spec) = nullptr;
  // The op's spec as a JSON object of its fields, named as in its struct: the cache sidecar's
  // "spec" (KernelSpec::to_json adds op and arch) and, flattened, KernelSpec::describe.
  nlohmann::ordered_json (*to_json)(const KernelSpec& spec) = nullptr;
  // The dynamic shared memory every launch of the kernel takes, from its spec alone: a kernel
  // is loaded allowing it, by its first call or by a prewarm. Null: none.
  unsigned (*shared_bytes)(const KernelSpec& spec) = nullptr;
  // Ops whose kernels are compiled per weight: the weight shape {N, K} a kernel serves (N 0: every
  // N of its K), for prewarm_gaps. Null: the op has no weight.
  std::pair<int64_t, int64_t> (*weight_shape)(const KernelSpec& spec) = nullptr;
  // Ops with tuned kernels (the tuning table's entries; null: none). `tuned_problem`: the spec
  // less what the tuner chooses, the table's key. `from_json`: to_json's object back, each field
  // range-checked, as a spec of `arch`; empty, or why not. `tuned_problem_why`: why a tuned spec
  // for an M bucket is not one the op can run; empty when it is.
  KernelSpec (*tuned_problem)(const KernelSpec& tuned) = nullptr;
  std::string (*from_json)(const nlohmann::json& object, Arch arch, KernelSpec* spec) = nullptr;
  std::string (*tuned_problem_why)(const KernelSpec& tuned, int m_bucket) = nullptr;
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
