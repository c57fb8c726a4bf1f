#include "ops/gemm/m_buckets.hpp"

#include <algorithm>

namespace nvfp4::jit::detail {

int gemm_m_bucket(int64_t m) {
  for (int b : kGemmMBuckets)
    if (m <= b) return b;
  return kGemmLargeM;
}

int64_t gemm_bucket_m(int bucket) { return bucket == kGemmLargeM ? 4096 : bucket; }

std::pair<int64_t, int64_t> gemm_bucket_rows(int bucket) {
  const int* it = std::find(std::begin(kGemmMBuckets), std::end(kGemmMBuckets), bucket);
  return {it == std::begin(kGemmMBuckets) ? 1 : *(it - 1) + 1, bucket == kGemmLargeM ? kGemmLargestTrimmedM : bucket};
}

int64_t gemm_row_step(int64_t m, int block_m) {
  const int64_t tiles = (m + block_m - 1) / block_m;
  return std::min<int64_t>(block_m, ((m + tiles - 1) / tiles + 7) / 8 * 8);
}

int gemm_trimmed_height(int block_m, int64_t m) {
  return int(std::min<int64_t>(block_m, (gemm_row_step(m, block_m) + 15) / 16 * 16));
}

GemmTile gemm_trimmed_to_rows(GemmTile tile, int64_t m) {
  tile.block_m = uint16_t(gemm_trimmed_height(tile.block_m, m));
  return tile;
}

}  // namespace nvfp4::jit::detail
