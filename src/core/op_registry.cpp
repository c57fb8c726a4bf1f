#include "core/op_registry.hpp"

#include <algorithm>
#include <array>
#include <mutex>
#include <utility>

#include "core/error.hpp"

namespace nvfp4::jit::detail {

namespace {

// Filled by static initializers before main, read afterwards: the mutex only orders the
// registrations of one library's initializers among themselves.
struct Registry {
  std::mutex mutex;
  std::array<OpKernels, 256> ops{};
  std::vector<std::pair<int, PrewarmExpansion>> expansions;
};

Registry& registry() {
  static Registry* r = new Registry;  // leaked: ops may be looked up during static destruction
  return *r;
}

}  // namespace

bool register_op(Op op, OpKernels kernels) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.ops[size_t(uint8_t(op))] = kernels;
  return true;
}

bool register_prewarm(int order, PrewarmExpansion expansion) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.expansions.emplace_back(order, expansion);
  std::stable_sort(r.expansions.begin(), r.expansions.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  return true;
}

const OpKernels& op_kernels(Op op) {
  const OpKernels& kernels = registry().ops[size_t(uint8_t(op))];
  if (!kernels.generate) fail(Status::internal, "no op is registered for op code {}", int(op));
  return kernels;
}

std::vector<PrewarmExpansion> prewarm_expansions() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  std::vector<PrewarmExpansion> all;
  for (const auto& [order, expansion] : r.expansions) all.push_back(expansion);
  return all;
}

}  // namespace nvfp4::jit::detail
