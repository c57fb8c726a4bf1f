// The GEMM front and the sm_90a backend as the CPU tests drive them: specs, tile choices and
// prewarm lists for a weight shape, with the backend's own tile type.
#pragma once
#include <cstdint>
#include <vector>

#include "core/prewarm.hpp"
#include "ops/gemm/backend.hpp"
#include "ops/gemm/call.hpp"
#include "ops/gemm/sm90/tiles.hpp"
#include "ops/gemm/tile_choice.hpp"

namespace nvfp4::jit::detail::test {

inline const GemmBackend& sm90_backend() { return gemm_backend(Arch::sm_90a, "test"); }

inline KernelSpec sm90_problem(int64_t n, int64_t k, bool prepacked = false, DType a = DType::bf16, DType d = DType::bf16,
                               ScaleLayout layout = ScaleLayout::linear, uint8_t bias = kNoDType) {
  return gemm_problem(Arch::sm_90a, n, k, a, d, layout, prepacked, bias);
}

inline KernelSpec sm90_spec(const KernelSpec& problem, const sm90::Tile& tile) {
  return gemm_spec(problem, sm90::to_config(tile));
}

inline sm90::Tile sm90_choice(const sm90::Tile* tuned, int64_t n, int64_t k, int64_t m, bool prepacked) {
  const TileConfig config = tuned ? sm90::to_config(*tuned) : TileConfig{};
  return sm90::from_config(
      gemm_tile_choice(sm90_backend(), sm90_problem(n, k, prepacked), tuned ? &config : nullptr, m, 132));
}

inline std::vector<sm90::Tile> to_tiles(const std::vector<TileConfig>& configs) {
  std::vector<sm90::Tile> tiles;
  for (const TileConfig& c : configs) tiles.push_back(sm90::from_config(c));
  return tiles;
}

inline std::vector<sm90::Tile> sm90_bucket_tiles(int64_t n, int64_t k, int bucket, bool prepacked) {
  return to_tiles(gemm_bucket_tiles(sm90_backend(), sm90_problem(n, k, prepacked), bucket, 132));
}

// A weight shape prewarmed in every weight layout (the default is ModelOpt's linear one).
inline WeightShape every_layout(int64_t n, int64_t k, int32_t groups = 1) {
  WeightShape shape{"", n, k, groups, {}};
  shape.variants.b_layouts = {WeightLayout::linear, WeightLayout::swizzled, WeightLayout::prepacked};
  return shape;
}

// The GEMM kernels a prewarm of one weight shape (of `groups` experts) compiles, every layout.
inline std::vector<KernelSpec> gemm_prewarm(Arch arch, int64_t n, int64_t k, int32_t groups = 1) {
  std::vector<KernelSpec> gemm;
  for (const KernelSpec& s : prewarm_specs({every_layout(n, k, groups)}, {arch}, 132))
    if (s.op == Op::gemm) gemm.push_back(s);
  return gemm;
}

}  // namespace nvfp4::jit::detail::test
