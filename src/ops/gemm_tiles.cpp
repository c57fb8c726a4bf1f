#include "ops/gemm_tiles.hpp"

#include <algorithm>

namespace nvfp4::jit::detail {

namespace {
constexpr unsigned kSm90SharedBytes = 227 * 1024;  // opt-in maximum per block
// activation boxes, packed weights, block scales: the template's STAGE_BYTES
unsigned stage_bytes(const GemmTile& t) {
  return unsigned(t.block_k / 64 * t.block_m * 128 + 64 * t.consumers * t.block_k / 2 + 8 * t.block_k);
}
}  // namespace

int gemm_m_bucket(int64_t m) {
  for (int b : kGemmMBuckets)
    if (m <= b) return b;
  return kGemmMBuckets[std::size(kGemmMBuckets) - 1];
}

unsigned gemm_shared_bytes(const GemmTile& tile) {
  return 1024 + unsigned(tile.stages) * stage_bytes(tile) + 16u * unsigned(tile.stages);
}

GemmTile gemm_heuristic(Arch /*arch*/, int64_t n, int64_t k, int bucket, int sm_count) {
  GemmTile t;
  t.block_m = std::min(bucket, 256);
  t.consumers = bucket >= 128 ? 2 : 1;
  t.block_k = bucket <= 64 ? 256 : 128;
  // Measured on an H200 (docs/perf.md): decode buckets run best with 4 stages and the grid
  // split until it covers the SMs once; more stages or splits lose. Larger tiles take what
  // fits; the one-row-tile buckets (M <= 256) split K to fill the GPU, prefill never does.
  t.stages = bucket <= 128 ? 4 : int(std::min<unsigned>(8, (kSm90SharedBytes - 1024 - 128) / stage_bytes(t)));
  const int64_t ktiles = (k + t.block_k - 1) / t.block_k;
  const int64_t ctas = (n + 64 * t.consumers - 1) / (64 * t.consumers);
  const int max_split = bucket <= 64 ? 4 : bucket <= 256 ? 2 : 1;
  while (ctas * t.split_k < sm_count && t.split_k < max_split && ktiles / (2 * t.split_k) >= 4) t.split_k *= 2;
  return t;
}

}  // namespace nvfp4::jit::detail
