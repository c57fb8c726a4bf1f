#include "ops/gemm/block_scaled/backend.hpp"

#include <fmt/format.h>

#include "common/scale_layout.cuh"
#include "common/tile_scheduler.cuh"

namespace nvfp4::jit::detail::block_scaled {

std::string family_problem(const ArchPair& pair, const GemmSpec& problem) {
  const std::string label = fmt::format("{} / {}", to_string(pair.archs[0]), to_string(pair.archs[1]));
  if (gemm_epilogue_code(problem) == nvfp4k::EPILOGUE_MOE_COMBINE && gemm_problem_grouped(problem) != nvfp4k::GROUPED_CONTIGUOUS)
    return "epilogue moe_combine runs on contiguous groups (moe_route's rows) only";
  if (problem.a_dtype != uint8_t(DType::nvfp4))
    return fmt::format("the {0} GEMM takes NVFP4 activations (a_dtype = nvfp4, W4A4) only: a_dtype = {1} "
                       "(W4A16) is not implemented on {0} yet; quantize the activations first",
                       label, dtype_name(problem.a_dtype));
  if (gemm_problem_prepacked(problem))
    return fmt::format("a prepacked weight (sm_90a's layout) does not run on {}: pass the weight as ModelOpt stores it",
                       label);
  if (gemm_problem_grouped(problem) == nvfp4k::GROUPED_BATCHED)
    return fmt::format("the batched grouped layout is not implemented on {} yet (contiguous and masked are)", label);
  return {};
}

std::string family_kernel_name(const ArchPair& pair, const GemmSpec& spec, bool emulated, std::string_view tile) {
  return fmt::format("nvfp4_gemm_w4a4_{}{}n{}_k{}_{}_a{}_w{}{}_{}{}", emulated ? fmt::format("{}emu_", pair.name) : std::string(pair.prefix),
                     grouped_name(spec), spec.n, spec.k, dtype_name(spec.out_dtype),
                     scale_layout_name(gemm_a_scale_layout(spec)), scale_layout_name(spec.scale_layout), bias_name(spec), tile,
                     epilogue_name(spec));
}

GeneratedKernel family_kernel(const ArchPair& pair, const GemmSpec& spec, std::string name, std::string_view tile_args) {
  const int grouped = gemm_problem_grouped(spec), epilogue = gemm_epilogue_code(spec);
  // NVFP4 D's quantization holds IEEE divisions and reciprocals, whose slow paths are calls;
  // without a stated occupancy ptxas then holds the kernel to 128 registers and spills in the
  // main loop (sm_120a's grouped 64 x 128 tile). A minimum of one CTA an SM frees it to take what
  // the tile needs (its shared memory, not its registers, bounds how many an SM holds).
  const int min_blocks = spec.out_dtype == uint8_t(DType::nvfp4) ? 1 : 0;
  return entry_point(gemm_key(spec), spec.tile.threads, std::move(name), fmt::format("{}/gemm_w4a4.cuh", pair.name), pair.params,
                     fmt::format("nvfp4k::{0}::gemm_w4a4<nvfp4k::{0}::GemmConfig<{1}, {2}, {3}LL, {4}LL, {5}, {6}, {7}{8}{9}>>(p)", pair.name,
                                 spec.out_dtype, gemm_bias_code(spec), spec.n, spec.k, gemm_a_scale_layout(spec),
                                 spec.scale_layout, tile_args,
                                 grouped || epilogue ? fmt::format(", {}, {}", grouped, spec.groups) : "",
                                 epilogue ? fmt::format(", {}", epilogue) : ""),
                     min_blocks);
}

}  // namespace nvfp4::jit::detail::block_scaled
