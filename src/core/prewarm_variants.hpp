// What a deployment runs besides its weight shapes, for a prewarm to compile: the GEMM's
// activation dtype (nvfp4: W4A4), output dtype, bias, the weight's scale layout (or prepacked),
// W4A4 A's scale layout, the grouped layout, the quantizers' input dtypes and which quantizers
// write the weight's activations. Each is a list; a prewarm compiles every combination the
// arch's backends run (a GEMM's one: ops/gemm/prewarm_variants.hpp). One vocabulary everywhere: a CLI flag `--a-dtype fp16,bf16` is the
// manifest field `a-dtype=fp16,bf16` and PrewarmOptions::variants.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/spec.hpp"
#include "nvfp4/jit.hpp"

namespace nvfp4::jit::detail {

enum class WeightLayout : uint8_t { linear, swizzled, prepacked };
// The ops that write a weight's activations (its K-wide rows): each prewarms its quantizer at
// the weight's K. moe_stage (its flag value: `stage`) only for a grouped weight.
enum class AFrom : uint8_t { quantize, rmsnorm, swiglu, mhc, moe_stage };
// The dtype of RMSNorm's weight (RMSNorm and mHC): the input's, or fp32.
enum class NormWeight : uint8_t { input, fp32 };
// RMSNorm of A inside the GEMM (GemmArgs::a_rmsnorm_weight): none, its weight in A's dtype
// (`input`), or in fp32.
enum class GemmARmsNorm : uint8_t { none, input, fp32 };
// A residual added in the GEMM's epilogue (GemmArgs::residual): none, or add.
enum class GemmResidual : uint8_t { none, add };

struct PrewarmVariants {
  std::vector<DType> a_dtypes{DType::bf16, DType::nvfp4};  // bf16, fp16, nvfp4 (W4A4)
  std::vector<DType> d_dtypes{DType::bf16};                // bf16, fp16, fp32
  std::vector<uint8_t> biases{kNoDType};                   // kNoDType (none), bf16, fp32
  // ModelOpt's layout as stored (what gemm on a checkpoint's tensors runs, on every arch) and
  // prepacked (what Nvfp4Linear runs: sm_90a's faster path; the archs without it skip it).
  // A deployment that runs one of them names it (--b-layout linear): half the sm_90a GEMMs.
  std::vector<WeightLayout> b_layouts{WeightLayout::linear, WeightLayout::prepacked};
  // Of W4A4's A: linear, what quantize, the fused quantizers and Nvfp4Linear write by default
  // (swizzled128x4 only when asked for). One layout, not both: each more is another compile of
  // every W4A4 tile on sm_100a and sm_120a, and a deployment quantizes its activations one way.
  std::vector<ScaleLayout> a_scales{ScaleLayout::linear};
  std::vector<GroupedLayout> grouped{GroupedLayout::contiguous};  // of a grouped weight (groups > 1)
  // Input dtypes of the quantizers (bf16, fp16, fp32); empty: quantize and row amax for bf16 and
  // fp16, the fused row quantizers (RMSNorm, SwiGLU, mHC) for bf16.
  std::vector<DType> in_dtypes;
  // Every quantizer by default: a manifest that knows its model names the few it runs (Llama's
  // down_proj reads SwiGLU's output, never an RMSNorm's).
  std::vector<AFrom> a_from{AFrom::quantize, AFrom::rmsnorm, AFrom::swiglu, AFrom::mhc, AFrom::moe_stage};
  // The norm weights' dtypes; empty: each op's usual one (RMSNorm the input's, mHC fp32, as
  // DeepSeek-V4 keeps it). A checkpoint that keeps RMSNorm's weight in fp32 names `fp32`.
  std::vector<NormWeight> norm_weights;
  // The GEMM's epilogue: none, swiglu (a gate_up weight's fused SwiGLU; prepacked, n/2 a
  // multiple of 8, sm_90a), or moe-combine (a grouped down weight's fused MoE combine;
  // contiguous groups, sm_90a): where these do not hold, nothing more is compiled.
  std::vector<GemmEpilogue> epilogues{GemmEpilogue::none};
  // The GEMM's precision modes: exact, and w4a8 (sm_90a, prepacked weights, dense: its kernels
  // and its activation pass) where a deployment asks for it.
  std::vector<GemmPrecision> precisions{GemmPrecision::exact};
  // RMSNorm of A in the GEMM: none, input, fp32 (sm_90a, dense exact-mode W4A16 kernels; where
  // these do not hold, nothing more is compiled).
  std::vector<GemmARmsNorm> a_rmsnorms{GemmARmsNorm::none};
  // The GEMM's residual add (GemmArgs::residual): none, add (sm_90a, dense exact-mode W4A16
  // without a fused epilogue; elsewhere nothing more is compiled).
  std::vector<GemmResidual> residuals{GemmResidual::none};

  bool writes_a(AFrom op) const;
  bool operator==(const PrewarmVariants&) const = default;
};

// The variant keys, in the order `prewarm_variant_flags` prints them.
inline constexpr std::string_view kPrewarmVariantKeys[] = {"a-dtype",  "d-dtype",  "bias",   "b-layout",   "a-scales",
                                                           "grouped",  "in-dtype", "a-from", "norm-weight",
                                                           "epilogue", "precision", "a-rmsnorm", "residual"};

// Sets `key` (one of kPrewarmVariantKeys) to the comma-separated `values`, replacing what it held.
// Returns why not ("" when done): an unknown key, an unknown or repeated value, an empty list.
std::string set_prewarm_variant(PrewarmVariants& variants, std::string_view key, std::string_view values);
// Applies space-separated `key=values` fields (PrewarmOptions::variants' syntax). Returns why not.
std::string set_prewarm_variants(PrewarmVariants& variants, std::string_view fields);

// A value as the variant fields write it: "bf16", "prepacked", "swizzled" (swizzled128x4),
// "masked"; a bias of kNoDType is "none".
std::string_view variant_name(DType dtype);
std::string_view variant_name(WeightLayout layout);
std::string_view variant_name(ScaleLayout layout);
std::string_view variant_name(GroupedLayout layout);
std::string_view variant_name(GemmPrecision precision);
std::string_view bias_variant_name(uint8_t bias);
std::string_view variant_name(GemmEpilogue epilogue);
std::string_view variant_name(GemmARmsNorm rmsnorm);
std::string_view variant_name(GemmResidual residual);
// "rmsnorm,quantize": the list as the `a-from` field writes it.
std::string a_from_names(const std::vector<AFrom>& ops);

}  // namespace nvfp4::jit::detail
