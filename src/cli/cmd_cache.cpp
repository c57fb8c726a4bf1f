// nvfp4-jit cache stats|ls|verify|prune|clear|export|import
#include <chrono>
#include <cstdio>
#include <map>

#include <fmt/format.h>

#include "cli/cli.hpp"
#include "core/cache_archive.hpp"
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

// "30" (days), "30d", "12h", "90m", "45s"
std::chrono::seconds parse_age(const std::string& text) {
  size_t used = 0;
  long long n = -1;
  try {
    n = std::stoll(text, &used);
  } catch (const std::exception&) {
  }
  const std::string unit = text.substr(used);
  const long long scale = unit.empty() || unit == "d" ? 86400 : unit == "h" ? 3600 : unit == "m" ? 60 : unit == "s" ? 1 : 0;
  if (n < 0 || scale == 0) throw UsageError(fmt::format("--older-than `{}`: expected a number of days, or N with d, h, m or s", text));
  return std::chrono::seconds(n * scale);
}

int archive(DiskCache& cache, const std::string& what, const std::string& file, bool json) {
  const ArchiveSummary s = what == "export" ? export_cache(cache, file) : import_cache(cache, file);
  for (const std::string& why : s.skipped) std::fprintf(stderr, "nvfp4-jit cache %s: skipped %s\n", what.c_str(), why.c_str());
  if (json)
    std::printf("{\"kernels\":%zu,\"tables\":%zu,\"already_present\":%zu,\"skipped\":%zu}\n", s.kernels, s.tables,
                s.already_present, s.skipped.size());
  else if (what == "export")
    std::printf("cache export: %zu kernels and %zu tuning tables to %s\n", s.kernels, s.tables, file.c_str());
  else
    std::printf("cache import: %zu new kernels (%zu already present), %zu tuning tables, %zu skipped, into %s\n",
                s.kernels, s.already_present, s.tables, s.skipped.size(), cache.roots().primary.c_str());
  return s.skipped.empty() ? kOk : kFailed;
}

}  // namespace

int cmd_cache(const Args& args) {
  args.allow_only({"--json", "--remove-bad", "--older-than"});
  if (args.positional().empty())
    throw UsageError("expected one of: stats, ls, verify, prune, clear, export FILE, import FILE");
  const std::string& what = args.positional()[0];
  if ((what == "export" || what == "import") != (args.positional().size() == 2))
    throw UsageError(what == "export" || what == "import" ? fmt::format("cache {} takes one FILE", what)
                                                          : fmt::format("unexpected argument `{}`", args.positional().back()));
  DiskCache& cache = KernelStore::instance().disk();
  const bool json = args.has("--json");
  if (what == "stats") return stats(cache, json);
  if (what == "ls") return list(cache, json, false, false);
  if (what == "verify") return list(cache, json, true, args.has("--remove-bad"));
  if (what == "export" || what == "import") return archive(cache, what, args.positional()[1], json);
  if (what == "prune") {
    if (!args.has("--older-than")) throw UsageError("cache prune needs --older-than AGE");
    const size_t n = cache.prune(parse_age(args.get("--older-than")));
    if (json) std::printf("{\"removed_entries\":%zu}\n", n);
    else std::printf("cache prune: removed %zu entries older than %s from %s\n", n, args.get("--older-than").c_str(),
                     cache.roots().primary.c_str());
    return kOk;
  }
  if (what == "clear") {
    const size_t n = cache.clear();
    if (json) std::printf("{\"removed_files\":%zu}\n", n);
    else std::printf("cache clear: removed %zu files from %s\n", n, cache.roots().primary.c_str());
    return kOk;
  }
  throw UsageError(fmt::format("unknown cache action `{}`", what));
}

}  // namespace nvfp4::jit::cli
