// The GEMM front and the sm_90a backend as the CPU tests drive them: specs, tile choices and
// prewarm lists for a weight shape, with the backend's own tile type.
#pragma once
#include <cstdint>
#include <vector>

#include "core/prewarm.hpp"
#include "core/tuning_table.hpp"
#include "ops/gemm/backend.hpp"
#include "ops/gemm/call.hpp"
#include "ops/gemm/sm90/tiles.hpp"
#include "ops/gemm/tile_choice.hpp"

namespace nvfp4::jit::detail::test {

inline const GemmBackend& sm90_backend() { return gemm_backend(Arch::sm_90a, "test"); }

inline GemmSpec sm90_problem(int64_t n, int64_t k, bool prepacked = false, DType a = DType::bf16, DType d = DType::bf16,
                               ScaleLayout layout = ScaleLayout::linear, uint8_t bias = kNoDType) {
  return gemm_problem(Arch::sm_90a, n, k, a, d, layout, prepacked, bias);
}

inline GemmSpec sm90_spec(const GemmSpec& problem, const sm90::Tile& tile) {
  return gemm_spec(problem, sm90::to_config(tile));
}

inline sm90::Tile sm90_choice(const sm90::Tile* tuned, int64_t n, int64_t k, int64_t m, bool prepacked) {
  const GemmTile config = tuned ? sm90::to_config(*tuned) : GemmTile{};
  return sm90::from_config(
      gemm_tile_choice(sm90_backend(), sm90_problem(n, k, prepacked), tuned ? &config : nullptr, m, 132));
}

inline std::vector<sm90::Tile> to_tiles(const std::vector<GemmTile>& configs) {
  std::vector<sm90::Tile> tiles;
  for (const GemmTile& c : configs) tiles.push_back(sm90::from_config(c));
  return tiles;
}

inline std::vector<sm90::Tile> sm90_bucket_tiles(int64_t n, int64_t k, int bucket, bool prepacked) {
  return to_tiles(gemm_bucket_tiles(sm90_backend(), sm90_problem(n, k, prepacked), bucket, 132));
}

// The SASS mnemonic of an sm_90a GEMM kernel's products: the 8-row decode tile (16-bit
// activations) multiplies by warp (HMMA.16816), the others by warpgroup (HGMMA).
inline const char* sm90_mma_mnemonic(const GemmSpec& spec) {
  return spec.tile.block_m == 8 && !(spec.flags & kFlagW4A8) ? "HMMA.16816" : "HGMMA";
}

// A spec as the kernel key, GEMM or not (lists of a prewarm's specs hold every op's).
inline KernelSpec key_of(const KernelSpec& spec) { return spec; }
inline KernelSpec key_of(const GemmSpec& spec) { return gemm_key(spec); }

inline GeneratedKernel generate(const GemmSpec& spec) { return detail::generate(gemm_key(spec)); }

// The GEMM specs among `specs`.
inline std::vector<GemmSpec> gemm_specs_of(const std::vector<KernelSpec>& specs) {
  std::vector<GemmSpec> gemm;
  for (const KernelSpec& s : specs)
    if (s.op == Op::gemm) gemm.push_back(gemm_spec_of(s));
  return gemm;
}

// A weight shape prewarmed in every weight layout (the default is ModelOpt's linear one).
inline WeightShape every_layout(int64_t n, int64_t k, int32_t groups = 1) {
  WeightShape shape{"", n, k, groups, {}};
  shape.variants.b_layouts = {WeightLayout::linear, WeightLayout::swizzled, WeightLayout::prepacked};
  return shape;
}

// The GEMM kernels a prewarm of one weight shape (of `groups` experts) compiles, every layout.
inline std::vector<GemmSpec> gemm_prewarm(Arch arch, int64_t n, int64_t k, int32_t groups = 1) {
  return gemm_specs_of(prewarm_specs({every_layout(n, k, groups)}, {arch}, 132));
}

// The GEMM kernels a prewarm of one weight shape with `--epilogue <epilogue>` (and D's dtype
// `d`) compiles for `arch`, every layout.
inline std::vector<GemmSpec> gemm_prewarm_epilogue(Arch arch, int64_t n, int64_t k, int32_t groups, GemmEpilogue epilogue,
                                                   DType d = DType::bf16) {
  WeightShape shape = every_layout(n, k, groups);
  shape.variants.epilogues = {epilogue};
  shape.variants.d_dtypes = {d};
  return gemm_specs_of(prewarm_specs({shape}, {arch}, 132));
}

// The fused SwiGLU GEMM kernels (GemmEpilogue::swiglu) of a gate_up weight shape (N = 2I);
// d: D's dtype, NVFP4 for the epilogue that quantizes D.
inline std::vector<GemmSpec> gemm_prewarm_swiglu(Arch arch, int64_t n, int64_t k, int32_t groups = 1, DType d = DType::bf16) {
  return gemm_prewarm_epilogue(arch, n, k, groups, GemmEpilogue::swiglu, d);
}

// A tuning entry of a BF16 GEMM of N x K on sm_90a: M bucket `bucket` tuned to an 8-row tile of
// one consumer warpgroup (one the backend builds: import and load check that).
inline TuningEntry sm90_tuned_entry(int64_t n, int64_t k, int bucket) {
  sm90::Tile tile;
  tile.block_m = 8, tile.consumers = 2, tile.block_k = 256, tile.stages = 4, tile.split_k = 1;
  TuningEntry e;
  e.tuned = gemm_key(gemm_spec(sm90_problem(n, k), sm90::to_config(tile)));
  e.m_bucket = bucket;
  return e;
}

}  // namespace nvfp4::jit::detail::test
