#include "ops/gemm/block_scaled/tiles.hpp"

namespace nvfp4::jit::detail::block_scaled {

GemmTile tile_config(int block_m, int block_n, int block_k, int threads, int stages, int split_k) {
  GemmTile c;
  c.block_m = uint16_t(block_m);
  c.block_n = uint16_t(block_n);
  c.block_k = uint16_t(block_k);
  c.threads = uint16_t(threads);
  c.stages = uint8_t(stages);
  c.split_k = uint8_t(split_k);
  return c;
}

}  // namespace nvfp4::jit::detail::block_scaled
