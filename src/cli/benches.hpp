// The benchmarks `nvfp4-jit bench` runs, each printing its table and returning its results as
// JSON (bench --out). cmd_bench.cpp checks their arguments before any GPU is looked for.
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cli/json_out.hpp"
#include "core/gpu_util.hpp"
#include "core/manifest.hpp"
#include "nvfp4/jit.hpp"

namespace nvfp4::jit::cli {

// Cold compile, disk-cache hit and warm dispatch host times.
Json bench_core(bool quick);

// The rows x K a bandwidth bench times: --m and --k (defaults 8192, 4096, 16, 1 rows of 8192),
// or without either the table of docs/perf.md.
using RowSizes = std::vector<std::pair<int64_t, int64_t>>;
RowSizes row_sizes(std::vector<int64_t> ms, std::vector<int64_t> ks);
// The bandwidth benches: dequantize and the quantizers, against a device copy of as many bytes.
inline const std::vector<std::string> kBandwidthBenches = {"dequantize",          "quantize",  "rmsnorm-quantize",
                                                           "swiglu-quantize",     "mhc-rmsnorm-quantize", "moe-stage"};
struct BandwidthOptions {
  DType in_dtype = DType::bf16;  // rmsnorm-quantize (also fp32), swiglu-quantize
  bool weight_fp32 = false;      // rmsnorm-quantize
  bool per_row = false;          // the fused quantizers: each row's global scale computed
};
Json bench_bandwidth(const std::string& what, bool quick, const RowSizes& sizes, const BandwidthOptions& options);

// Restricts `bench gemm` to the given weight shapes and / or one M (empty / 0: the default set).
struct GemmBenchFilter {
  std::vector<detail::WeightShape> weights;
  std::vector<int64_t> ms;
};
Json bench_gemm(bool quick, const GemmBenchFilter& only);
// The tuner's candidate tiles (the device's GEMM backend's), timed on the decode shapes (bench
// gemm without --quick or a filter); none where the backend does not run W4A16.
Json bench_tiles(detail::EventTimer& timer, int runs, std::mt19937& rng);

// Restricts `bench grouped`: expert shapes (weights: N, K and the experts as groups, each token
// routed to topk of them; given, the batched wo_a is left out), token counts, and expected_m
// hints timed in turns with the default (empty: the default set, none).
struct GroupedBenchFilter {
  std::vector<detail::WeightShape> weights;
  int topk = 8;
  std::vector<int64_t> tokens, expected_ms;
};
// grouped_gemm on MoE expert shapes, beside the byte floor, our dense gemm and a cuBLAS loop.
Json bench_grouped(bool quick, const GroupedBenchFilter& only = {});

// The blocks `bench block` knows, by name ("llama-3.1-8b-mlp", "deepseek-v3-moe", ...).
std::vector<std::string> block_names();
// Restricts `bench block` to some blocks and token counts (empty: all of them).
struct BlockBenchFilter {
  std::vector<std::string> blocks;
  std::vector<int64_t> tokens;
};
// A decoder's MLP and MoE blocks timed whole, as an engine runs them: today's public ops chained
// into one block, eight blocks with eight routings in one CUDA graph, beside the byte floor.
Json bench_block(bool quick, const BlockBenchFilter& only);

}  // namespace nvfp4::jit::cli
