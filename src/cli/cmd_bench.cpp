// nvfp4-jit bench <benchmark>: its arguments checked before any GPU is looked for, then the
// benchmark run on this machine's GPU, printed and saved as JSON (--out).
#include <algorithm>
#include <cstdio>
#include <fstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/benches.hpp"
#include "cli/cli.hpp"
#include "core/gpu_util.hpp"
#include "ops/moe_route_op.hpp"

namespace nvfp4::jit::cli {

using namespace detail;

int cmd_bench(const Args& args) {
  std::vector<std::string> benchmarks = {"core"};
  benchmarks.insert(benchmarks.end(), kBandwidthBenches.begin(), kBandwidthBenches.end());
  benchmarks.insert(benchmarks.end(), {"gemm", "grouped", "block"});
  const std::string listed = fmt::format("{}", fmt::join(benchmarks, ", "));
  if (args.positional().size() != 1) throw UsageError(fmt::format("expected one of: {}", listed));
  const std::string what = args.positional()[0];
  if (std::find(benchmarks.begin(), benchmarks.end(), what) == benchmarks.end())
    throw UsageError(fmt::format("unknown benchmark `{}` (one of: {}){}", what, listed, did_you_mean(what, benchmarks)));
  // The GEMM filter is checked before the GPU is looked for, so a typo is a usage error anywhere.
  GemmBenchFilter only;
  GroupedBenchFilter grouped;
  if (args.has("--shape") && what != "gemm" && what != "grouped") throw UsageError("--shape is for `bench gemm` and `bench grouped`");
  const bool is_bandwidth = std::find(kBandwidthBenches.begin(), kBandwidthBenches.end(), what) != kBandwidthBenches.end();
  if (args.has("--m") && what != "gemm" && !is_bandwidth) throw UsageError("--m is for `bench gemm` and the bandwidth benches");
  if (args.has("--k") && !is_bandwidth) throw UsageError("--k is for the bandwidth benches (dequantize and the quantizers)");
  for (const std::string& shape : args.all("--shape"))
    (what == "grouped" ? grouped.weights : only.weights).push_back(detail::parse_shape(shape));
  for (const detail::WeightShape& w : only.weights)
    if (w.groups != 1) throw UsageError(fmt::format("--shape {},{},{}: experts are for `bench grouped`", w.n, w.k, w.groups));
  // comma-separated positive integers, from every use of `flag`
  auto positive_list = [&](const char* flag, const char* what_it_is) {
    std::vector<int64_t> values;
    for (const std::string& list : args.all(flag))
      for (const std::string& m : split(list, ',')) {
        size_t used = 0;
        long long v = 0;
        try {
          v = std::stoll(m, &used);
        } catch (const std::exception&) {
        }
        if (used != m.size() || v < 1) throw UsageError(fmt::format("{} {}: {} is a positive integer", flag, m, what_it_is));
        values.push_back(v);
      }
    return values;
  };
  only.ms = positive_list("--m", "M");
  const RowSizes sizes = row_sizes(only.ms, positive_list("--k", "K"));
  for (auto [m, k] : sizes)
    if (is_bandwidth && k % 32) throw UsageError(fmt::format("--k {}: a multiple of 32", k));
  for (const char* flag : {"--expected-m", "--topk"})
    if (args.has(flag) && what != "grouped") throw UsageError(fmt::format("{} is for `bench grouped`", flag));
  if (args.has("--tokens") && what != "grouped" && what != "block") throw UsageError("--tokens is for `bench grouped` and `bench block`");
  if (args.has("--block") && what != "block") throw UsageError("--block is for `bench block`");
  BlockBenchFilter blocks;
  const std::vector<std::string> known_blocks = block_names();
  for (const std::string& list : args.all("--block"))
    for (const std::string& name : split(list, ',')) {
      if (std::find(known_blocks.begin(), known_blocks.end(), name) == known_blocks.end())
        throw UsageError(fmt::format("--block {}: one of {}{}", name, fmt::join(known_blocks, ", "), did_you_mean(name, known_blocks)));
      blocks.blocks.push_back(name);
    }
  grouped.expected_ms = positive_list("--expected-m", "expected_m");
  grouped.tokens = blocks.tokens = positive_list("--tokens", "a token count");
  int64_t topk = grouped.topk;
  if (args.has("--topk")) {
    const std::vector<int64_t> counts = positive_list("--topk", "experts a token is routed to");
    if (counts.size() != 1 || grouped.weights.empty()) throw UsageError("--topk takes one count, for the experts of --shape N,K,G");
    topk = counts[0];
  }
  // what the bench's prepack, moe_route and GEMM would refuse only after the experts are built
  for (const detail::WeightShape& w : grouped.weights) {
    const std::string shape = fmt::format("--shape {},{},{}", w.n, w.k, w.groups);
    if (w.groups < 2) throw UsageError(fmt::format("--shape {},{}: give the experts too (N,K,G)", w.n, w.k));
    if (w.groups > detail::kMoeRouteMaxGroups)
      throw UsageError(fmt::format("{}: at most {} experts (moe_route's)", shape, detail::kMoeRouteMaxGroups));
    if (w.k % 32) throw UsageError(fmt::format("{}: K must be a multiple of 32 (the GEMM's)", shape));
    if (w.groups < topk)
      throw UsageError(fmt::format("{}: {} experts, fewer than the {} each token is routed to{}", shape, w.groups, topk,
                                   args.has("--topk") ? "" : " (--topk, default 8)"));
  }
  grouped.topk = int(topk);
  if (args.has("--in-dtype") && what != "swiglu-quantize" && what != "rmsnorm-quantize")
    throw UsageError("--in-dtype is for `bench swiglu-quantize` and `bench rmsnorm-quantize`");
  const std::string in_dtype = args.has("--in-dtype") ? args.get("--in-dtype") : "bf16";
  if (in_dtype != "bf16" && in_dtype != "fp16" && !(in_dtype == "fp32" && what == "rmsnorm-quantize"))
    throw UsageError(fmt::format("--in-dtype {}: bf16 or fp16 (fp32 too for rmsnorm-quantize)", in_dtype));
  BandwidthOptions bandwidth;
  bandwidth.in_dtype = in_dtype == "fp16" ? DType::fp16 : in_dtype == "fp32" ? DType::fp32 : DType::bf16;
  if (args.has("--weight-fp32") && what != "rmsnorm-quantize") throw UsageError("--weight-fp32 is for `bench rmsnorm-quantize`");
  bandwidth.weight_fp32 = args.has("--weight-fp32");
  bandwidth.per_row = args.has("--per-row");
  if (bandwidth.per_row && what != "rmsnorm-quantize" && what != "swiglu-quantize" && what != "mhc-rmsnorm-quantize" &&
      what != "moe-stage")
    throw UsageError("--per-row is for `bench rmsnorm-quantize`, `swiglu-quantize`, `mhc-rmsnorm-quantize` and `moe-stage`");
  std::string why;
  if (!use_primary_context(0, &why)) {
    std::fprintf(stderr, "nvfp4-jit bench: needs a GPU: %s\n", why.c_str());
    return kNoGpu;
  }
  const bool quick = args.has("--quick");
  const Json json = what == "core"    ? bench_core(quick)
                    : what == "gemm"    ? bench_gemm(quick, only)
                    : what == "grouped" ? bench_grouped(quick, grouped)
                    : what == "block"   ? bench_block(quick, blocks)
                                        : bench_bandwidth(what, quick, sizes, bandwidth);
  if (args.has("--out")) {
    std::ofstream(args.get("--out")) << dump(json) << "\n";
  }
  return kOk;
}

}  // namespace nvfp4::jit::cli
