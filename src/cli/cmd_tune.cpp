// nvfp4-jit tune: pick the fastest GEMM tile per M bucket on this GPU and remember it.
#include <chrono>
#include <cstdio>
#include <limits>

#include <fmt/format.h>

#include "cli/cli.hpp"
#include "cli/json_out.hpp"
#include "core/gpu_util.hpp"
#include "core/manifest.hpp"
#include "core/prewarm.hpp"
#include "nvfp4/jit.hpp"
#include "ops/gemm/tune.hpp"

namespace nvfp4::jit::cli {

using namespace detail;

namespace {
// Timed launches per candidate: each is a GEMM on this GPU, times every candidate and bucket.
constexpr int kMaxRuns = 10000;
}  // namespace

int cmd_tune(const Args& args) {
  const std::vector<WeightShape> shapes = shapes_from(args);
  for (const WeightShape& s : shapes)  // known without a GPU: said before one is looked for
    if (const std::string why = gemm_k_problem(s); !why.empty())
      throw UsageError(fmt::format("{}`{}` (N = {}, K = {}): {}", s.origin.empty() ? "" : s.origin + ": ", s.name, s.n, s.k, why));
  const std::string layout = args.get("--layout", "linear");
  if (layout != "linear" && layout != "swizzled128x4" && layout != "prepacked")
    throw UsageError("--layout is linear, swizzled128x4 or prepacked");
  const std::string a_dtype = args.get("--a-dtype", "bf16"), a_scales = args.get("--a-scales", "linear");
  if (a_dtype != "bf16" && a_dtype != "fp16" && a_dtype != "nvfp4") throw UsageError("--a-dtype is bf16, fp16 or nvfp4");
  if (a_scales != "linear" && a_scales != "swizzled") throw UsageError("--a-scales is linear or swizzled");
  const std::string precision = args.get("--precision", "exact");
  if (precision != "exact" && precision != "w4a8") throw UsageError("--precision is exact or w4a8");
  if (precision == "w4a8" && layout != "prepacked") throw UsageError("--precision w4a8 needs --layout prepacked");
  const std::string grouped = args.get("--grouped", "contiguous");
  if (grouped != "contiguous" && grouped != "masked") throw UsageError("--grouped is contiguous or masked");
  const std::string epilogue = args.get("--epilogue", "none");
  if (epilogue == "moe-combine")
    throw UsageError("--epilogue moe-combine runs the tiles tuned for its grouped GEMM without it: tune with --epilogue none");
  if (epilogue != "none" && epilogue != "swiglu") throw UsageError("--epilogue is none or swiglu");
  TuneOptions options;
  options.m = args.get_int("--m", 0, 1, std::numeric_limits<int>::max());
  options.runs = args.get_int("--runs", options.runs, 1, kMaxRuns);
  const bool json = args.has("--json");
  for (const WeightShape& s : shapes)
    if (s.groups > 1 && options.m > kMaxTunedGroupedM)
      throw UsageError(fmt::format("--m {}: a grouped shape (`{}`, {} experts) is tuned up to {} rows per expert",
                                   options.m, s.name, s.groups, kMaxTunedGroupedM));

  std::string why;
  if (!use_primary_context(0, &why)) {
    std::fprintf(stderr, "nvfp4-jit tune: no GPU: %s\n", why.c_str());
    return kNoGpu;
  }
  const auto t0 = std::chrono::steady_clock::now();
  Json results = Json::array();
  if (!json)
    std::printf("%-14s %6s %6s %8s  %-24s %10s  %-24s %10s %7s\n", "shape", "N", "K", "M bucket", "heuristic", "us",
                "tuned", "us", "gain");
  for (size_t i = 0; i < shapes.size(); ++i) {
    GemmProblem problem;
    problem.n = shapes[i].n, problem.k = shapes[i].k;
    problem.scale_layout = layout == "swizzled128x4" ? ScaleLayout::swizzled128x4 : ScaleLayout::linear;
    problem.b_prepacked = layout == "prepacked";
    problem.a_dtype = a_dtype == "nvfp4" ? DType::nvfp4 : a_dtype == "fp16" ? DType::fp16 : DType::bf16;
    problem.a_scale_layout = a_scales == "linear" ? ScaleLayout::linear : ScaleLayout::swizzled128x4;
    problem.epilogue = epilogue == "swiglu" ? GemmEpilogue::swiglu : GemmEpilogue::none;
    problem.precision = precision == "w4a8" ? GemmPrecision::w4a8 : GemmPrecision::exact;
    if (shapes[i].groups > 1) {  // its M buckets are rows per expert
      problem.groups = shapes[i].groups;
      problem.grouped_layout = grouped == "masked" ? GroupedLayout::masked : GroupedLayout::contiguous;
    }
    const auto t = std::chrono::steady_clock::now();
    const std::vector<TunedBucket> buckets = tune(problem, options);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    for (const TunedBucket& b : buckets) {
      const std::string bucket = b.m_bucket ? fmt::format("<={}", b.m_bucket) : ">2048";
      if (json)
        results.push_back({{"shape", shapes[i].name}, {"n", problem.n}, {"k", problem.k}, {"groups", problem.groups},
                           {"m_bucket", b.m_bucket}, {"heuristic", b.heuristic}, {"heuristic_us", rounded(b.heuristic_us, 3)},
                           {"tuned", b.winner}, {"tuned_us", rounded(b.winner_us, 3)}, {"candidates", b.candidates}});
      else
        std::printf("%-14s %6lld %6lld %8s  %-24s %10.2f  %-24s %10.2f %6.1f%%\n", shapes[i].name.c_str(),
                    (long long)problem.n, (long long)problem.k, bucket.c_str(), b.heuristic.c_str(), b.heuristic_us,
                    b.winner.c_str(), b.winner_us, 100 * (b.heuristic_us / b.winner_us - 1));
    }
    if (!json)
      std::printf("  (%zu buckets in %.1f s%s)\n", buckets.size(), seconds,
                  problem.groups ? fmt::format(", {} experts: M is rows per expert", problem.groups).c_str() : "");
    std::fflush(stdout);
  }
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (json) std::printf("%s\n", dump(Json{{"seconds", rounded(total, 3)}, {"results", results}}).c_str());
  else std::printf("tune: %zu shapes in %.1f s\n", shapes.size(), total);
  return kOk;
}

}  // namespace nvfp4::jit::cli
