#include "core/prewarm.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <mutex>
#include <set>
#include <system_error>
#include <thread>
#include <tuple>
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

namespace {

struct KnownGpu {
  const char* name;
  int sm_count;
};
// Data-center and workstation parts that run sm_90a, sm_100a and sm_120a / sm_121a kernels.
constexpr KnownGpu kKnownGpus[] = {{"h100-sxm", 132}, {"h100-pcie", 114}, {"h100-nvl", 132}, {"h200", 132},
                                   {"h800", 132},     {"gh200", 132},     {"h20", 78},        {"b200", 148},
                                   {"rtx-5090", 170}, {"rtx-pro-6000", 188}, {"gb10", 48}};

std::string gpu_name_key(std::string_view name) {
  std::string key;
  for (char c : name) key += c == '_' || c == ' ' ? '-' : char(std::tolower(static_cast<unsigned char>(c)));
  return key;
}

}  // namespace

std::optional<int> known_gpu_sm_count(std::string_view name) {
  const std::string key = gpu_name_key(name);
  for (const KnownGpu& gpu : kKnownGpus)
    if (key == gpu.name) return gpu.sm_count;
  return std::nullopt;
}

std::string known_gpu_names() {
  std::string names;
  for (const KnownGpu& gpu : kKnownGpus) names += fmt::format("{}{} ({})", names.empty() ? "" : ", ", gpu.name, gpu.sm_count);
  return names;
}

std::string gemm_k_problem(const WeightShape& shape) {
  // the GEMM reads K two NVFP4 blocks at a time
  if (shape.k % 32) return fmt::format("K = {} is not a multiple of 32, so no GEMM kernel serves this shape", shape.k);
  return {};
}

std::vector<std::string> prewarm_gaps(const std::vector<WeightShape>& shapes, const std::vector<Arch>& archs,
                                      const std::vector<KernelSpec>& specs) {
  // The GEMMs found, by arch and (N, K); a GEMM kernel that takes N as an argument (n = 0 in
  // its spec) serves every N of its K. Built once: a manifest may hold thousands of shapes.
  std::set<std::tuple<Arch, int64_t, int64_t>> gemms;
  std::set<Arch> archs_with_gemm;
  for (const KernelSpec& s : specs)
    if (s.op == Op::gemm) {
      const auto [n, k] = op_kernels(s.op).weight_shape(s);
      gemms.insert({s.arch, n, k}), archs_with_gemm.insert(s.arch);
    }
  auto has_gemm = [&](Arch arch, const WeightShape& shape) {
    return gemms.count({arch, shape.n, shape.k}) || gemms.count({arch, int64_t(0), shape.k});
  };
  auto k_served = [](const WeightShape& shape) { return gemm_k_problem(shape).empty(); };
  std::vector<std::string> gaps;
  std::vector<Arch> served;
  // An arch without GEMMs lacks a backend only when some shape's K could have had one.
  const bool any_k_served = std::any_of(shapes.begin(), shapes.end(), k_served);
  for (Arch arch : archs) {
    if (archs_with_gemm.count(arch)) served.push_back(arch);
    else if (any_k_served)
      gaps.push_back(fmt::format("{}: no GEMM kernels (no GEMM backend serves this arch in this build)", to_string(arch)));
  }
  for (const WeightShape& shape : shapes) {
    const std::string where = shape.origin.empty() ? "" : shape.origin + ": ";
    if (!k_served(shape)) {
      gaps.push_back(fmt::format("{}`{}` (N = {}, K = {}): no GEMM kernels: {}; its quantizers and dequantize are prewarmed",
                                 where, shape.name, shape.n, shape.k, gemm_k_problem(shape)));
      continue;
    }
    std::string missing;
    for (Arch arch : served)
      if (!has_gemm(arch, shape)) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", to_string(arch));
    if (!missing.empty())
      gaps.push_back(fmt::format("{}`{}` (N = {}, K = {}): no GEMM kernels on {}; its quantizers and dequantize are prewarmed",
                                 where, shape.name, shape.n, shape.k, missing));
  }
  return gaps;
}

size_t load_prewarmed(const DeviceInfo& device, const std::vector<KernelSpec>& specs,
                      const std::unordered_set<KernelSpec, KernelSpecHash>& failed) {
  size_t loaded = 0;
  for (const KernelSpec& spec : specs) {
    if (spec.arch != device.arch || failed.count(spec)) continue;
    if (!find_kernel(device, spec)) load_kernel(device, spec, nullptr, "nvfp4::jit::prewarm with load, not capturing");
    ++loaded;
  }
  return loaded;
}

int prewarm_thread_count(int requested, size_t kernels) {
  const size_t most = std::min<size_t>(kMaxPrewarmThreads, std::max<size_t>(kernels, 1));
  return int(std::clamp<size_t>(size_t(std::max(requested, 1)), 1, most));
}

PrewarmSummary prewarm(const std::vector<KernelSpec>& specs, int threads,
                       const std::function<void(const PrewarmEvent&)>& on_done) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  PrewarmSummary summary;
  summary.total = specs.size();
  std::atomic<size_t> next{0};
  std::mutex mutex;
  std::vector<size_t> deferred;  // under `mutex`
  size_t next_deferred = 0, in_first_pass = 0;
  // Visits specs[i]; with `defer_busy`, one whose key another process holds goes to `deferred`.
  auto visit = [&](size_t i, bool defer_busy) {
    const auto t0 = clock::now();
    PrewarmEvent event{&specs[i], Origin::memory, 0, {}};
    try {
      if (!KernelStore::instance().get(specs[i], &event.origin, defer_busy)) {
        std::lock_guard lock(mutex);
        deferred.push_back(i);
        ++summary.deferred;
        return;
      }
    } catch (const std::exception& e) {
      event.error = e.what();
    }
    event.seconds = std::chrono::duration<double>(clock::now() - t0).count();
    std::lock_guard lock(mutex);
    if (!event.error.empty()) ++summary.failed;
    else if (event.origin == Origin::compiled) ++summary.compiled;
    else ++summary.cached;
    if (on_done) on_done(event);
  };
  auto worker = [&] {
    {
      std::lock_guard lock(mutex);
      ++in_first_pass;
    }
    for (size_t i = next++; i < specs.size(); i = next++) visit(i, true);
    {
      std::lock_guard lock(mutex);
      --in_first_pass;
    }
    // The put-off kernels, waiting for their holders: by now the other processes have had the
    // whole list's time to finish them, so most are disk hits.
    while (true) {
      std::unique_lock lock(mutex);
      if (next_deferred < deferred.size()) {
        const size_t i = deferred[next_deferred++];
        lock.unlock();
        visit(i, false);
      } else if (in_first_pass == 0) {
        return;
      } else {
        lock.unlock();
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
  };
  std::vector<std::thread> pool;
  // never more threads than kernels: an idle thread costs its stack and its start
  const int wanted = prewarm_thread_count(threads, specs.size());
  for (int t = 1; t < wanted; ++t) {
    try {
      pool.emplace_back(worker);
    } catch (const std::system_error& e) {  // no more threads: the ones started (and this one) do the rest
      warn_once("prewarm-threads", fmt::format("prewarm runs on {} threads, not {}: {}", pool.size() + 1, wanted, e.what()));
      break;
    }
  }
  summary.threads = pool.size() + 1;
  worker();
  for (std::thread& t : pool) t.join();
  summary.seconds = std::chrono::duration<double>(clock::now() - start).count();
  return summary;
}

}  // namespace nvfp4::jit::detail
