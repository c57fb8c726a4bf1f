// nvfp4-jit bench block: a decoder's MLP and MoE blocks timed whole, as an engine runs them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace nvfp4::jit::cli {

// The blocks `bench block` knows, by name ("llama-3.1-8b-mlp", "deepseek-v3-moe", ...).
std::vector<std::string> block_names();

// Restricts `bench block` to some blocks and token counts (empty: all of them).
struct BlockBenchFilter {
  std::vector<std::string> blocks;
  std::vector<int64_t> tokens;
};
// Every block at every token count, activation mode and routing: today's public ops chained
// into one block, eight blocks with eight routings in one CUDA graph, beside the block's byte
// floor. Returns the rows as JSON.
std::string bench_block(bool quick, const BlockBenchFilter& only);

}  // namespace nvfp4::jit::cli
