// Mixture-of-experts routing (top-k ids -> expert-sorted rows) and combine (expert outputs ->
// tokens). templates/moe_route.cuh holds the kernels; this file their specs, checks, launch and
// the CPU references with the kernels' exact results.
#pragma once
#include "core/codegen.hpp"
#include "core/spec.hpp"
#include "nvfp4/jit.hpp"

namespace nvfp4::jit::detail {

// The most experts one routing CTA sorts (its shared memory holds a count per warp and expert).
constexpr int32_t kMoeRouteMaxGroups = 512;

// Spec flags of a routing kernel: int64 ids; the first of two launches (counts per CTA).
constexpr uint8_t kRouteIds64 = 1, kRouteCount = 2;
KernelSpec moe_route_spec(Arch arch, int32_t groups, bool ids_int64, bool count = false);
// vec: 8 (16-byte vectors) or 1.
KernelSpec moe_combine_spec(Arch arch, DType d, DType weights, DType out, int vec);
GeneratedKernel generate_moe_route(const KernelSpec& spec);
GeneratedKernel generate_moe_combine(const KernelSpec& spec);

}  // namespace nvfp4::jit::detail
