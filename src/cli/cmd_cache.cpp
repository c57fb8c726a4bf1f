// nvfp4-jit cache stats|ls|verify|prune|clear|export|import
#include <charconv>
#include <chrono>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "cli/cli.hpp"
#include "cli/json_out.hpp"
#include "core/cache_archive.hpp"
#include "core/kernel_store.hpp"
#include "core/nvrtc_library.hpp"
#include "core/nvrtc_mismatch.hpp"
#include "core/printable.hpp"

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

// The primary root cannot be changed: say so and fail, rather than report "removed 0".
int refuse_read_only(const DiskCache& cache, const std::string& what, bool json) {
  const std::string why = fmt::format("the cache root {} is read-only ({}): nothing {}", cache.roots().primary,
                                      cache.not_writable_reason(), what == "import" ? "imported" : "removed");
  if (json) std::printf("%s\n", dump(Json{{"error", why}}).c_str());
  std::fprintf(stderr, "nvfp4-jit cache %s: %s\n", what.c_str(), why.c_str());
  return kFailed;
}

int stats(DiskCache& cache, bool json) {
  std::vector<CacheEntryInfo> entries, refused_dirs;
  for (CacheEntryInfo& e : cache.list(false)) (e.key.empty() ? refused_dirs : entries).push_back(std::move(e));
  std::map<std::string, std::pair<size_t, uint64_t>> per_arch;
  uint64_t bytes = 0;
  for (const auto& e : entries) {
    per_arch[e.arch].first++;
    per_arch[e.arch].second += e.size;
    bytes += e.size;
  }
  const CacheRoots& roots = cache.roots();
  const std::string why = cache.not_writable_reason();
  const NvrtcCounts by_nvrtc = count_by_nvrtc(entries);
  if (json) {
    Json nvrtc_roots = Json::object();
    for (const auto& [root, versions] : by_nvrtc) {
      Json& counts = nvrtc_roots[root] = Json::object();
      for (const auto& [version, n] : versions) counts[version.empty() ? "unknown" : version] = n;
    }
    Json archs = Json::object();
    for (const auto& [arch, v] : per_arch) archs[arch] = {{"entries", v.first}, {"bytes", v.second}};
    Json refused = Json::array();
    for (const auto& [path, reason] : cache.refused_roots()) refused.push_back({{"path", path}, {"why", reason}});
    for (const auto& d : refused_dirs) refused.push_back({{"path", d.path}, {"why", d.problem}});
    Json out = {{"root", roots.primary},
                {"writable", cache.writable()},
                {"read_only", !cache.writable()},
                {"why", why},
                {"read_only_roots", cache.read_only_in_use()},
                {"refused_roots", refused},
                {"entries", entries.size()},
                {"bytes", bytes},
                {"archs", archs}};
    add_nvrtc_fields(out);
    out["entries_by_nvrtc"] = nvrtc_roots;
    Json old = Json::array();
    for (const OldCacheLayout& o : cache.old_layouts())
      old.push_back({{"root", o.root}, {"layout", o.layout}, {"entries", o.entries}, {"bytes", o.bytes}});
    out["old_layouts"] = old;
    std::printf("%s\n", dump(out).c_str());
    return kOk;
  }
  std::printf("root       %s (%s)\n", roots.primary.c_str(),
              cache.writable()         ? "writable"
              : cache.primary_absent() ? "not made yet: made by the first kernel stored"
                                       : fmt::format("read-only: {}; compiled kernels are not stored", why).c_str());
  for (const auto& r : cache.read_only_in_use()) std::printf("read-only  %s\n", r.c_str());
  for (const auto& [path, reason] : cache.refused_roots()) std::printf("NOT USED   %s: %s\n", path.c_str(), reason.c_str());
  for (const auto& d : refused_dirs) std::printf("NOT USED   %s: %s\n", d.path.c_str(), d.problem.c_str());
  std::printf("entries    %zu, %.1f MiB\n", entries.size(), bytes / 1048576.0);
  for (const auto& [arch, v] : per_arch) std::printf("  %-8s %6zu entries %8.1f MiB\n", arch.c_str(), v.first, v.second / 1048576.0);
  // An earlier layout's entries are never read: `cache prune` (or clear) removes them.
  for (const OldCacheLayout& o : cache.old_layouts())
    std::printf("old layout %s/%s: %llu entries, %.1f MiB, not read by this version (cache prune removes it)\n", o.root.c_str(),
                o.layout.c_str(), (unsigned long long)o.entries, o.bytes / 1048576.0);
  std::printf("NVRTC      %s\n", nvrtc_line().c_str());
  // Entries are keyed by the NVRTC that built them: another's are misses for this process.
  const NvrtcLoaded& ours = nvrtc_loaded();
  for (const auto& [root, versions] : by_nvrtc)
    for (const auto& [version, n] : versions)
      std::printf("  built by NVRTC %-7s %6zu entries in %s%s\n", version.empty() ? "unknown" : version.c_str(), n,
                  root.c_str(), ours.error.empty() && version != ours.version ? " (not used by this NVRTC)" : "");
  return kOk;
}

int list(DiskCache& cache, bool json, bool verify, bool remove_bad) {
  if (remove_bad && !cache.writable() && !cache.primary_absent())
    return refuse_read_only(cache, "verify --remove-bad", json);
  const auto entries = cache.list(verify);
  size_t bad = 0, removed = 0, in_flight = 0;
  Json items = Json::array();
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    const bool is_bad = !e.problem.empty() && !e.in_flight;
    if (e.in_flight) ++in_flight;
    if (is_bad) {
      ++bad;
      if (remove_bad && cache.remove(e)) ++removed;
    }
    if (json) {
      // a sidecar holds whatever was written into it: its spec is printed as JSON only when it is
      items.push_back({{"arch", e.arch}, {"key", e.key}, {"size", e.size}, {"created", e.created}, {"path", e.path},
                       {"ok", e.problem.empty()}, {"in_flight", e.in_flight}, {"problem", e.problem},
                       {"spec", Json::parse(e.spec_json, nullptr, false)}});
      if (items.back()["spec"].is_discarded()) items.back()["spec"] = nullptr;
    } else if (!verify || !e.problem.empty()) {
      const std::string note = e.problem.empty() ? ""
                               : e.in_flight     ? fmt::format("  IN FLIGHT: {} ({})", e.problem, e.path)
                                                 : fmt::format("  BAD: {} ({})", e.problem, e.path);
      // a sidecar holds whatever was written into it (an imported one too): no raw control bytes
      std::printf("%-8s %s %8llu  %s  %s%s\n", printable(e.arch).c_str(), printable(e.key).c_str(),
                  (unsigned long long)e.size, printable(e.created).c_str(), printable(spec_summary(e.spec_json)).c_str(),
                  printable(note).c_str());
    }
  }
  if (json) std::printf("%s\n", dump(items).c_str());
  if (!verify) return kOk;
  // Temp and lock files of writers that are gone: reported, and swept with --remove-bad.
  size_t stale = 0;
  for (const CacheLeftover& l : cache.leftovers()) {
    if (l.in_use) continue;
    ++stale;
    // stdout under --json holds the entries' array only
    std::fprintf(json ? stderr : stdout, "leftover %s (%s)\n", l.path.c_str(), l.what.c_str());
  }
  const size_t swept = remove_bad ? cache.sweep_leftovers() : 0;
  if (!json)
    std::printf("verify: %zu entries, %zu bad%s, %zu being written, %zu leftover files%s\n", entries.size(), bad,
                remove_bad ? fmt::format(", {} removed", removed).c_str() : "", in_flight, stale,
                remove_bad ? fmt::format(", {} removed", swept).c_str() : "");
  // A root refused as untrusted was not verified: that is no clean bill.
  for (const auto& [path, reason] : cache.refused_roots())
    std::fprintf(stderr, "nvfp4-jit cache verify: refused the cache root %s, not verified: %s\n", path.c_str(), reason.c_str());
  return (bad && removed < bad) || !cache.refused_roots().empty() ? kFailed : kOk;
}

// "30" (days), "30d", "12h", "90m", "45s": digits only, and a count of seconds that fits.
std::chrono::seconds parse_age(const std::string& text) {
  const size_t digits = text.find_first_not_of("0123456789");
  const std::string number = text.substr(0, digits), unit = digits == std::string::npos ? "" : text.substr(digits);
  const int64_t scale = unit.empty() || unit == "d" ? 86400 : unit == "h" ? 3600 : unit == "m" ? 60 : unit == "s" ? 1 : 0;
  if (number.empty() || scale == 0)
    throw UsageError(fmt::format("--older-than `{}`: expected a number of days, or N with d, h, m or s", text));
  int64_t n = 0;
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), n);
  if (ec != std::errc() || n > std::numeric_limits<int64_t>::max() / scale)
    throw UsageError(fmt::format("--older-than `{}`: out of range (at most {} seconds)", text,
                                 std::numeric_limits<int64_t>::max()));
  return std::chrono::seconds(n * scale);
}

int archive(DiskCache& cache, const std::string& what, const std::string& file, bool json) {
  const ArchiveSummary s = what == "export" ? export_cache(cache, file) : import_cache(cache, file);
  for (const std::string& why : s.skipped)
    std::fprintf(stderr, "nvfp4-jit cache %s: skipped %s\n", what.c_str(), printable(why).c_str());
  // `export -` writes the archive on stdout: the summary goes beside it, to stderr
  FILE* out = what == "export" && file == "-" ? stderr : stdout;
  if (json)
    std::fprintf(out, "%s\n",
                 dump({{"kernels", s.kernels}, {"tables", s.tables}, {"already_present", s.already_present},
                       {"skipped", s.skipped.size()}})
                     .c_str());
  else if (what == "export")
    std::fprintf(out, "cache export: %zu kernels and %zu tuning tables to %s\n", s.kernels, s.tables,
                 file == "-" ? "standard output" : printable(file).c_str());
  else
    std::fprintf(out, "cache import: %zu new kernels (%zu already present), %zu tuning tables, %zu skipped, into %s\n",
                 s.kernels, s.already_present, s.tables, s.skipped.size(), printable(cache.roots().primary).c_str());
  return s.skipped.empty() ? kOk : kFailed;
}

}  // namespace

int cmd_cache(const Args& args) {
  if (args.positional().empty())
    throw UsageError("expected one of: stats, ls, verify, prune, clear, export FILE|-, import FILE|-");
  const std::string& what = args.positional()[0];
  if ((what == "export" || what == "import") != (args.positional().size() == 2))
    throw UsageError(what == "export" || what == "import" ? fmt::format("cache {} takes one FILE", what)
                                                          : fmt::format("unexpected argument `{}`", args.positional().back()));
  // Commands that only read make nothing on the cache's path (not even its root).
  const bool reads_only = what == "stats" || what == "ls" || what == "verify";
  std::optional<DiskCache> reader;
  if (reads_only) {
    CacheRoots roots = CacheRoots::from_env();
    roots.create_primary = false;
    reader.emplace(std::move(roots));
  }
  DiskCache& cache = reads_only ? *reader : KernelStore::instance().disk();
  const bool json = args.has("--json");
  if (what == "stats") return stats(cache, json);
  if (what == "ls") return list(cache, json, false, false);
  if (what == "verify") return list(cache, json, true, args.has("--remove-bad"));
  if (what == "export" || what == "import") return archive(cache, what, args.positional()[1], json);
  if (what == "prune") {
    if (!args.has("--older-than")) throw UsageError("cache prune needs --older-than AGE");
    const std::chrono::seconds age = parse_age(args.get("--older-than"));
    if (!cache.writable()) return refuse_read_only(cache, what, json);
    const size_t n = cache.prune(age);
    const size_t swept = cache.sweep_leftovers();
    std::vector<std::string> not_removed;
    const size_t old = cache.remove_old_layouts(&not_removed);
    for (const std::string& why : not_removed) std::fprintf(stderr, "nvfp4-jit cache prune: not removed: %s\n", why.c_str());
    if (json)
      std::printf("%s\n", dump({{"removed_entries", n}, {"removed_leftovers", swept}, {"removed_old_layout_entries", old}}).c_str());
    else std::printf("cache prune: removed %zu entries older than %s, %zu leftover files and %zu entries of earlier layouts from %s\n",
                     n, args.get("--older-than").c_str(), swept, old, cache.roots().primary.c_str());
    return not_removed.empty() ? kOk : kFailed;
  }
  if (what == "clear") {
    if (!cache.writable()) return refuse_read_only(cache, what, json);
    std::vector<std::string> not_removed;
    const size_t n = cache.clear(&not_removed);
    const size_t old = cache.remove_old_layouts(&not_removed);
    for (const std::string& why : not_removed) std::fprintf(stderr, "nvfp4-jit cache clear: not removed: %s\n", why.c_str());
    if (json)
      std::printf("%s\n", dump({{"removed_files", n}, {"removed_old_layout_entries", old}, {"not_removed", not_removed.size()}}).c_str());
    else std::printf("cache clear: removed %zu files and %zu entries of earlier layouts from %s\n", n, old, cache.roots().primary.c_str());
    return not_removed.empty() ? kOk : kFailed;
  }
  throw UsageError(fmt::format("unknown cache action `{}`{}", what,
                               did_you_mean(what, {"stats", "ls", "verify", "prune", "clear", "export", "import"})));
}

}  // namespace nvfp4::jit::cli
