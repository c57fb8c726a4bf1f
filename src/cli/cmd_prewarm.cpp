// nvfp4-jit prewarm: compile the kernels of model shapes into the disk cache.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "cli/cli.hpp"
#include "cli/json_out.hpp"
#include "core/codegen.hpp"
#include "core/driver.hpp"
#include "core/kernel_store.hpp"
#include "core/model_shapes.hpp"
#include "core/op_registry.hpp"
#include "core/prewarm.hpp"

namespace nvfp4::jit::cli {

using namespace detail;

namespace {

constexpr int kMaxSmCount = 1024;
constexpr int kMaxParallelSize = 65536;

std::vector<Arch> parse_archs(const std::string& list) {
  std::vector<Arch> archs;
  // every name between commas: `sm_90a,,sm_100a` or `,` is a mistake to report, not skipped
  for (size_t start = 0; start <= list.size();) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const std::string name = list.substr(start, comma - start);
    if (name.empty()) throw UsageError(fmt::format("--arch `{}`: an empty arch name ({})", list, arch_names()));
    const auto arch = parse_arch(name);
    if (!arch) throw UsageError(fmt::format("unknown arch `{}` ({})", name, arch_names()));
    archs.push_back(*arch);
    start = comma + 1;
  }
  return archs;
}

// The variant flags (--a-dtype fp16,bf16 ...), over the defaults.
PrewarmVariants variants_from(const Args& args) {
  PrewarmVariants variants;
  for (std::string_view key : kPrewarmVariantKeys) {
    const std::string flag = "--" + std::string(key);
    if (!args.has(flag)) continue;
    if (std::string why = set_prewarm_variant(variants, key, args.get(flag, "")); !why.empty())
      throw UsageError("--" + why);
  }
  return variants;
}

// This machine's first GPU, when there is one: its arch and SM count.
std::optional<std::pair<Arch, int>> local_gpu() {
  if (!driver_available()) return std::nullopt;
  const Driver& d = driver();
  int count = 0, major = 0, minor = 0, sms = 0;
  CUdevice dev = 0;
  if (d.cuDeviceGetCount(&count) != CUDA_SUCCESS || count < 1 || d.cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
      d.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) != CUDA_SUCCESS ||
      d.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) != CUDA_SUCCESS ||
      d.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) != CUDA_SUCCESS)
    return std::nullopt;
  const auto arch = arch_for_compute_capability(major, minor);
  if (!arch) return std::nullopt;
  return std::pair{*arch, sms};
}

// GEMM tiles depend on the SM count of the GPU that will run them: --sms N or a GPU's name;
// else this machine's GPU when its arch is prewarmed; else 132 (H100 SXM, H200).
int sm_count_from(const Args& args, const std::vector<Arch>& archs) {
  if (args.has("--sms")) {
    const std::string value = args.get("--sms", "");
    if (const auto known = known_gpu_sm_count(value)) return *known;
    if (value.empty() || value.find_first_not_of("0123456789") != std::string::npos)
      throw UsageError(fmt::format("--sms `{}` is neither an SM count nor a GPU we know ({})", value, known_gpu_names()));
    return args.get_int("--sms", kDefaultSmCount, 1, kMaxSmCount);
  }
  if (const auto gpu = local_gpu(); gpu && std::find(archs.begin(), archs.end(), gpu->first) != archs.end())
    return gpu->second;
  return kDefaultSmCount;
}

// --tp N / --ep N: a parallel size, 1 when not given; at most a grouped weight's expert count.
int sharding_size(const Args& args, const std::string& flag) { return args.get_int(flag, 1, 1, kMaxParallelSize); }

void draw_progress(const PrewarmSummary& s, size_t done) {
  constexpr int kWidth = 30;
  const int filled = s.total ? int(kWidth * done / s.total) : kWidth;
  std::fprintf(stderr, "\r[%s%s] %zu/%zu  compiled %zu  cached %zu  failed %zu ", std::string(filled, '=').c_str(),
               std::string(kWidth - filled, ' ').c_str(), done, s.total, s.compiled, s.cached, s.failed);
  std::fflush(stderr);
}

}  // namespace

int cmd_prewarm(const Args& args) {
  // every flag checked before any file is read or device looked at
  const PrewarmVariants variants = variants_from(args);
  const std::vector<Arch> archs = parse_archs(args.get("--arch", arch_names(kDefaultPrewarmArchs, ",")));
  const int threads = args.get_int("-j", int(std::clamp(std::thread::hardware_concurrency(), 1u, unsigned(kMaxPrewarmThreads))),
                                   1, kMaxPrewarmThreads);
  const int tp = sharding_size(args, "--tp"), ep = sharding_size(args, "--ep");
  std::vector<WeightShape> shapes;
  if (args.has("--model")) {
    const ModelShapes model = derive_model_shapes(args.get("--model"), tp, ep, variants);
    if (args.has("--shapes")) {  // the derived manifest, to read or save; nothing compiled
      std::fputs(model_manifest_text(model).c_str(), stdout);
      return kOk;
    }
    shapes = model.shapes;
  } else {
    for (const char* flag : {"--tp", "--ep", "--shapes"})
      if (args.has(flag)) throw UsageError(fmt::format("{} needs --model DIR", flag));
  }
  if (shapes.empty() || args.has("--manifest") || args.has("--shape")) {
    std::vector<WeightShape> more = shapes_from(args, variants);
    shapes.insert(shapes.end(), more.begin(), more.end());
  }
  shapes = merge_duplicate_shapes(std::move(shapes));

  const int sms = sm_count_from(args, archs);
  const std::vector<KernelSpec> specs = prewarm_specs(shapes, archs, sms);
  if (args.has("--list")) {  // what a prewarm would visit, compiling nothing
    for (const KernelSpec& spec : specs)
      std::printf("%s\t%s\n", op_kernels(spec.op).kernel_name(spec).c_str(), spec.to_json().c_str());
    return kOk;
  }
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
    const Json out = {{"kernels", summary.total},     {"shapes", shapes.size()},       {"compiled", summary.compiled},
                      {"cached", summary.cached},     {"failed", summary.failed},      {"not_stored", not_stored},
                      {"deferred", summary.deferred}, {"threads", summary.threads},    {"seconds", rounded(summary.seconds, 3)}};
    std::printf("%s\n", dump(out).c_str());
  } else {
    std::printf("prewarm: %zu kernels for %zu shapes on %zu archs: %zu compiled, %zu cache hits, %zu failed, %llu not "
                "stored in %.1f s\n",
                summary.total, shapes.size(), archs.size(), summary.compiled, summary.cached, summary.failed,
                (unsigned long long)not_stored, summary.seconds);
  }
  return summary.failed || not_stored ? kFailed : kOk;
}

}  // namespace nvfp4::jit::cli
