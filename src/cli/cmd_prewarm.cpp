// nvfp4-jit prewarm: compile the kernels of model shapes into the disk cache.
#include <unistd.h>

#include <cstdio>
#include <thread>

#include <fmt/format.h>

#include "cli/cli.hpp"
#include "core/codegen.hpp"
#include "core/kernel_store.hpp"
#include "core/op_registry.hpp"
#include "core/prewarm.hpp"

namespace nvfp4::jit::cli {

using namespace detail;

namespace {

std::vector<Arch> parse_archs(const std::string& list) {
  std::vector<Arch> archs;
  for (const std::string& name : split(list, ',')) {
    const auto arch = parse_arch(name);
    if (!arch) throw UsageError(fmt::format("unknown arch `{}` (sm_90a, sm_100a, sm_103a, sm_120a, sm_121a)", name));
    archs.push_back(*arch);
  }
  if (archs.empty()) throw UsageError("--arch is empty");
  return archs;
}

void draw_progress(const PrewarmSummary& s, size_t done) {
  constexpr int kWidth = 30;
  const int filled = s.total ? int(kWidth * done / s.total) : kWidth;
  std::fprintf(stderr, "\r[%s%s] %zu/%zu  compiled %zu  cached %zu  failed %zu ", std::string(filled, '=').c_str(),
               std::string(kWidth - filled, ' ').c_str(), done, s.total, s.compiled, s.cached, s.failed);
  std::fflush(stderr);
}

}  // namespace

int cmd_prewarm(const Args& args) {
  args.allow_only({"--manifest", "--shape", "--arch", "--sms", "-j", "--json", "--quiet"});
  if (!args.positional().empty()) throw UsageError(fmt::format("unexpected argument `{}`", args.positional()[0]));
  const std::vector<WeightShape> shapes = shapes_from(args);
  const std::vector<Arch> archs = parse_archs(args.get("--arch", "sm_90a,sm_100a,sm_120a"));
  const int threads = args.get_int("-j", int(std::max(1u, std::thread::hardware_concurrency())));
  if (threads < 1) throw UsageError("-j must be at least 1");

  // GEMM tiles depend on the SM count of the GPU that will run them (132: H100 SXM, H200)
  const int sms = args.get_int("--sms", kDefaultSmCount);
  if (sms < 1 || sms > 1024) throw UsageError(fmt::format("--sms {}: an SM count is 1 to 1024", sms));
  const std::vector<KernelSpec> specs = prewarm_specs(shapes, archs, sms);
  const bool json = args.has("--json"), quiet = args.has("--quiet");
  if (!quiet)
    for (const std::string& gap : prewarm_gaps(shapes, archs, specs)) std::fprintf(stderr, "nvfp4-jit prewarm: note: %s\n", gap.c_str());
  const bool bar = !quiet && !json && ::isatty(STDERR_FILENO);
  PrewarmSummary running;
  running.total = specs.size();
  size_t done = 0;
  std::vector<std::string> failures;
  if (bar) draw_progress(running, 0);
  const PrewarmSummary summary = prewarm(specs, threads, [&](const PrewarmEvent& e) {
    ++done;
    if (!e.error.empty()) ++running.failed, failures.push_back(e.error);
    else if (e.origin == Origin::compiled) ++running.compiled;
    else ++running.cached;
    if (bar) {
      draw_progress(running, done);
    } else if (!quiet && !json) {
      const char* what = !e.error.empty() ? "failed  " : e.origin == Origin::compiled ? "compiled" : "cached  ";
      std::fprintf(stderr, "%s %7.1f ms  %s %s\n", what, e.seconds * 1e3, std::string(to_string(e.spec->arch)).c_str(),
                   op_kernels(e.spec->op).kernel_name(*e.spec).c_str());
    }
  });
  if (bar) std::fputc('\n', stderr);
  for (const std::string& f : failures) std::fprintf(stderr, "nvfp4-jit prewarm: %s\n", f.c_str());
  // A prewarm exists to fill the cache: kernels compiled but not stored (read-only root, full
  // disk, a root that is a file, a path too long) are a failure, with the reason.
  const DiskCache& disk = KernelStore::instance().disk();
  const uint64_t not_stored = disk.not_stored();
  if (not_stored)
    std::fprintf(stderr, "nvfp4-jit prewarm: %llu kernels compiled but not stored in %s: %s\n",
                 (unsigned long long)not_stored, disk.roots().primary.empty() ? "(no cache root)" : disk.roots().primary.c_str(),
                 disk.last_store_problem().c_str());
  if (json) {
    std::printf("{\"kernels\":%zu,\"compiled\":%zu,\"cached\":%zu,\"failed\":%zu,\"not_stored\":%llu,\"deferred\":%zu,"
                "\"seconds\":%.3f}\n",
                summary.total, summary.compiled, summary.cached, summary.failed, (unsigned long long)not_stored,
                summary.deferred, summary.seconds);
  } else {
    std::printf("prewarm: %zu kernels for %zu shapes on %zu archs: %zu compiled, %zu cache hits, %zu failed, %llu not "
                "stored in %.1f s\n",
                summary.total, shapes.size(), archs.size(), summary.compiled, summary.cached, summary.failed,
                (unsigned long long)not_stored, summary.seconds);
  }
  return summary.failed || not_stored ? kFailed : kOk;
}

}  // namespace nvfp4::jit::cli
