#include "core/prewarm.hpp"

#include <atomic>
#include <chrono>
#include <mutex>
#include <system_error>
#include <thread>
#include <unordered_set>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/op_registry.hpp"

namespace nvfp4::jit::detail {

std::vector<KernelSpec> prewarm_specs(const std::vector<WeightShape>& shapes, const std::vector<Arch>& archs,
                                      int sm_count) {
  std::vector<KernelSpec> specs;
  std::unordered_set<KernelSpec, KernelSpecHash> seen;
  auto add = [&](const KernelSpec& spec) {
    if (seen.insert(spec).second) specs.push_back(spec);
  };
  const std::vector<PrewarmExpansion> expansions = prewarm_expansions();
  for (Arch arch : archs)
    for (const WeightShape& shape : shapes)
      for (PrewarmExpansion expand : expansions)
        for (const KernelSpec& spec : expand(arch, shape, sm_count)) add(spec);
  return specs;
}

PrewarmSummary prewarm(const std::vector<KernelSpec>& specs, int threads,
                       const std::function<void(const PrewarmEvent&)>& on_done) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  PrewarmSummary summary;
  summary.total = specs.size();
  std::atomic<size_t> next{0};
  std::mutex mutex;
  auto worker = [&] {
    for (size_t i = next++; i < specs.size(); i = next++) {
      const auto t0 = clock::now();
      PrewarmEvent event{&specs[i], Origin::memory, 0, {}};
      try {
        KernelStore::instance().get(specs[i], &event.origin);
      } catch (const std::exception& e) {
        event.error = e.what();
      }
      event.seconds = std::chrono::duration<double>(clock::now() - t0).count();
      std::lock_guard lock(mutex);
      if (!event.error.empty()) ++summary.failed;
      else if (event.origin == Origin::compiled) ++summary.compiled;
      else ++summary.cached;
      if (on_done) on_done(event);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < std::max(threads, 1); ++t) {
    try {
      pool.emplace_back(worker);
    } catch (const std::system_error& e) {  // no more threads: the ones started (and this one) do the rest
      warn_once("prewarm-threads", fmt::format("prewarm runs on {} threads, not {}: {}", pool.size() + 1, threads, e.what()));
      break;
    }
  }
  worker();
  for (std::thread& t : pool) t.join();
  summary.seconds = std::chrono::duration<double>(clock::now() - start).count();
  return summary;
}

}  // namespace nvfp4::jit::detail
