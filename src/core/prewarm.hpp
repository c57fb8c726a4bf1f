// Prewarm: compile (or find on disk) every kernel a set of weight shapes needs, for a set of
// archs, in parallel threads. Processes racing on the same keys compile each one once.
#pragma once
#include <functional>
#include <optional>
#include <string_view>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/kernel_store.hpp"
#include "core/launcher.hpp"
#include "core/manifest.hpp"
#include "core/spec.hpp"

namespace nvfp4::jit::detail {

// Every kernel of every op for these weight shapes on `archs`, deduplicated. GEMM tiles are
// the heuristic's for a device of `sm_count` SMs (132: H100 SXM and H200).
inline constexpr int kDefaultSmCount = 132;
std::vector<KernelSpec> prewarm_specs(const std::vector<WeightShape>& shapes, const std::vector<Arch>& archs,
                                      int sm_count = kDefaultSmCount);

// The SM count of a GPU named as `nvfp4-jit prewarm --sms` takes it ("h100-pcie", "b200", ...;
// case and `-`/`_`/space do not matter), if it is one we know.
std::optional<int> known_gpu_sm_count(std::string_view name);
std::string known_gpu_names();  // "h100-sxm (132), h100-pcie (114), ..."

// Why no GEMM kernel serves `shape` on any arch ("" when its K is one a GEMM reads).
std::string gemm_k_problem(const WeightShape& shape);

// Shapes that get no GEMM kernels, and why: one line per arch without a GEMM backend, one per
// shape whose K no GEMM serves (they still get their quantizers and dequantize).
std::vector<std::string> prewarm_gaps(const std::vector<WeightShape>& shapes, const std::vector<Arch>& archs,
                                      const std::vector<KernelSpec>& specs);

struct PrewarmEvent {
  const KernelSpec* spec;
  Origin origin;
  double seconds;
  std::string error;  // non-empty: failed
};

struct PrewarmSummary {
  size_t total = 0, compiled = 0, cached = 0, failed = 0;
  size_t deferred = 0;  // kernels another process was compiling when reached, visited again at the end
  size_t threads = 0;   // threads that compiled (the calling one included)
  double seconds = 0;
};

// Loads into `device`'s context each of `specs` of its arch that is not in `failed` (compiled
// already: a disk or memory hit), with the shared memory its op registers, so the ops' warm
// paths find them. Returns how many of them are loaded there now.
size_t load_prewarmed(const DeviceInfo& device, const std::vector<KernelSpec>& specs,
                      const std::unordered_set<KernelSpec, KernelSpecHash>& failed);

// The most compile threads a prewarm runs: NVRTC compiles are CPU-bound, and past the cores
// more threads only add memory and contention.
inline constexpr int kMaxPrewarmThreads = 256;
// The threads a prewarm of `kernels` kernels runs when `requested` are asked for: 1 to
// kMaxPrewarmThreads, never more than the kernels (a request below 1 is 1).
int prewarm_thread_count(int requested, size_t kernels);

// Runs on prewarm_thread_count(threads, specs.size()) threads. `on_done` is called
// (serialized) after each kernel. A kernel whose key another process holds
// (another prewarm of the same shapes) is put off until the rest is done, so processes
// prewarming one cache split the work instead of waiting on each other.
PrewarmSummary prewarm(const std::vector<KernelSpec>& specs, int threads,
                       const std::function<void(const PrewarmEvent&)>& on_done);

}  // namespace nvfp4::jit::detail
