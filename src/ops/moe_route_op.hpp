// Mixture-of-experts routing (top-k ids -> expert-sorted rows) and combine (expert outputs ->
// tokens). templates/moe_route.cuh holds the kernels; this file their specs, checks, launch and
// the CPU references with the kernels' exact results.
#pragma once
#include <string_view>
#include <tuple>

#include "core/codegen.hpp"
#include "core/spec.hpp"
#include "nvfp4/jit.hpp"

namespace nvfp4::jit::detail {

// The most experts one routing CTA sorts (its shared memory holds a count per warp and expert).
constexpr int32_t kMoeRouteMaxGroups = 512;

// What a routing kernel compiles in.
struct MoeRouteSpec {
  static constexpr Op kOp = Op::moe_route;
  static constexpr std::string_view kName = "MoeRouteSpec";
  static constexpr bool serves(Op op) { return op == kOp; }
  int32_t experts = 0;
  bool ids_int64 = false;
  bool count_only = false;  // the first of two launches: counts per CTA
  int threads = 0;
  template <class Self>
  static auto fields(Self& s) { return std::tie(s.experts, s.ids_int64, s.count_only, s.threads); }
};

// What a combine kernel compiles in.
struct MoeCombineSpec {
  static constexpr Op kOp = Op::moe_combine;
  static constexpr std::string_view kName = "MoeCombineSpec";
  static constexpr bool serves(Op op) { return op == kOp; }
  DType d_dtype = DType::bf16;  // the expert outputs'
  DType weights_dtype = DType::fp32;
  DType out_dtype = DType::bf16;
  int vec = 0;  // values a load: 8 (16-byte vectors) or 1
  int threads = 0;
  template <class Self>
  static auto fields(Self& s) { return std::tie(s.d_dtype, s.weights_dtype, s.out_dtype, s.vec, s.threads); }
};

KernelSpec moe_route_spec(Arch arch, int32_t experts, bool ids_int64, bool count_only = false);
// vec: 8 (16-byte vectors) or 1.
KernelSpec moe_combine_spec(Arch arch, DType d, DType weights, DType out, int vec);
GeneratedKernel generate_moe_route(const KernelSpec& spec);
GeneratedKernel generate_moe_combine(const KernelSpec& spec);

}  // namespace nvfp4::jit::detail
