// nvfp4-jit cache stats|ls|verify|clear
#include <cstdio>
#include <map>

#include <fmt/format.h>

#include "cli/cli.hpp"
#include "core/kernel_store.hpp"

namespace nvfp4::jit::cli {

using namespace detail;

namespace {

// A short kernel description from a sidecar's spec JSON.
std::string spec_summary(const std::string& spec_json) {
  auto field = [&](const char* name) {
    const std::string v = sidecar_field(spec_json, name);
    return v.empty() ? std::string("?") : v;
  };
  return fmt::format("{} K={} in={} out={}", field("op"), field("k"), field("a_dtype"), field("out_dtype"));
}

int stats(DiskCache& cache, bool json) {
  const auto entries = cache.list(false);
  std::map<std::string, std::pair<size_t, uint64_t>> per_arch;
  uint64_t bytes = 0;
  for (const auto& e : entries) {
    per_arch[e.arch].first++;
    per_arch[e.arch].second += e.size;
    bytes += e.size;
  }
  const CacheRoots& roots = cache.roots();
  if (json) {
    std::string archs;
    for (const auto& [arch, v] : per_arch)
      archs += fmt::format("{}\"{}\":{{\"entries\":{},\"bytes\":{}}}", archs.empty() ? "" : ",", arch, v.first, v.second);
    std::string ro;
    for (const auto& r : roots.read_only) ro += fmt::format("{}\"{}\"", ro.empty() ? "" : ",", json_escape(r));
    std::printf("{\"root\":\"%s\",\"writable\":%s,\"read_only_roots\":[%s],\"entries\":%zu,\"bytes\":%llu,\"archs\":{%s}}\n",
                json_escape(roots.primary).c_str(), cache.writable() ? "true" : "false", ro.c_str(), entries.size(),
                (unsigned long long)bytes, archs.c_str());
    return kOk;
  }
  std::printf("root       %s (%s)\n", roots.primary.c_str(), cache.writable() ? "writable" : "NOT writable: memory-only");
  for (const auto& r : roots.read_only) std::printf("read-only  %s\n", r.c_str());
  std::printf("entries    %zu, %.1f MiB\n", entries.size(), bytes / 1048576.0);
  for (const auto& [arch, v] : per_arch) std::printf("  %-8s %6zu entries %8.1f MiB\n", arch.c_str(), v.first, v.second / 1048576.0);
  return kOk;
}

int list(DiskCache& cache, bool json, bool verify, bool remove_bad) {
  const auto entries = cache.list(verify);
  size_t bad = 0, removed = 0;
  if (json) std::printf("[");
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    if (!e.problem.empty()) {
      ++bad;
      if (remove_bad && cache.remove(e)) ++removed;
    }
    if (json) {
      std::printf("%s{\"arch\":\"%s\",\"key\":\"%s\",\"size\":%llu,\"created\":\"%s\",\"path\":\"%s\",\"ok\":%s,"
                  "\"problem\":\"%s\",\"spec\":%s}",
                  i ? "," : "", e.arch.c_str(), e.key.c_str(), (unsigned long long)e.size, e.created.c_str(),
                  json_escape(e.path).c_str(), e.problem.empty() ? "true" : "false", json_escape(e.problem).c_str(),
                  e.spec_json.empty() ? "null" : e.spec_json.c_str());
    } else if (!verify || !e.problem.empty()) {
      std::printf("%-8s %s %8llu  %s  %s%s\n", e.arch.c_str(), e.key.c_str(), (unsigned long long)e.size,
                  e.created.c_str(), spec_summary(e.spec_json).c_str(),
                  e.problem.empty() ? "" : fmt::format("  BAD: {} ({})", e.problem, e.path).c_str());
    }
  }
  if (json) std::printf("]\n");
  if (verify && !json)
    std::printf("verify: %zu entries, %zu bad%s\n", entries.size(), bad,
                remove_bad ? fmt::format(", {} removed", removed).c_str() : "");
  return verify && bad && removed < bad ? kFailed : kOk;
}

}  // namespace

int cmd_cache(const Args& args) {
  args.allow_only({"--json", "--remove-bad"});
  if (args.positional().size() != 1) throw UsageError("expected one of: stats, ls, verify, clear");
  const std::string& what = args.positional()[0];
  DiskCache& cache = KernelStore::instance().disk();
  const bool json = args.has("--json");
  if (what == "stats") return stats(cache, json);
  if (what == "ls") return list(cache, json, false, false);
  if (what == "verify") return list(cache, json, true, args.has("--remove-bad"));
  if (what == "clear") {
    const size_t n = cache.clear();
    if (json) std::printf("{\"removed_files\":%zu}\n", n);
    else std::printf("cache clear: removed %zu files from %s\n", n, cache.roots().primary.c_str());
    return kOk;
  }
  throw UsageError(fmt::format("unknown cache action `{}`", what));
}

}  // namespace nvfp4::jit::cli
