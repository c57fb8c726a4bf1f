#include "ops/gemm_tiles.hpp"

#include <algorithm>

namespace nvfp4::jit::detail {

namespace {
constexpr unsigned kSm90SharedBytes = 227 * 1024;  // opt-in maximum per block
constexpr int kBlockK = 128;
unsigned stage_bytes(int block_m, int consumers) { return unsigned(2 * block_m * 128 + 64 * consumers * kBlockK / 2); }
}  // namespace

int gemm_m_bucket(int64_t m) {
  for (int b : kGemmMBuckets)
    if (m <= b) return b;
  return kGemmMBuckets[std::size(kGemmMBuckets) - 1];
}

unsigned gemm_shared_bytes(const GemmTile& tile) {
  return 1024 + unsigned(tile.stages) * stage_bytes(tile.block_m, tile.consumers) + 16u * unsigned(tile.stages);
}

GemmTile gemm_heuristic(Arch /*arch*/, int64_t n, int64_t k, int bucket, int sm_count) {
  GemmTile t;
  t.block_m = bucket;
  t.consumers = bucket >= 128 ? 2 : 1;
  const unsigned per_stage = stage_bytes(t.block_m, t.consumers);
  t.stages = int(std::min<unsigned>(8, (kSm90SharedBytes - 1024 - 128) / per_stage));
  const int64_t ktiles = (k + kBlockK - 1) / kBlockK;
  const int64_t ctas = (n + 64 * t.consumers - 1) / (64 * t.consumers);
  if (bucket <= 64) {
    // decode: the weights stream once, so spread them over every SM; each split keeps >= 8 tiles
    while (ctas * t.split_k < sm_count && t.split_k < 4 && ktiles / (2 * t.split_k) >= 8) t.split_k *= 2;
  }
  return t;
}

}  // namespace nvfp4::jit::detail
