#include "ops/gemm/gemm_spec.hpp"

#include <fmt/format.h>

#include "common/params.cuh"
#include "common/scale_layout.cuh"
#include "common/tile_scheduler.cuh"
#include "core/json_fields.hpp"
#include "ops/gemm/call.hpp"
#include "ops/gemm/spec_codes.hpp"
#include "nvfp4/jit.hpp"

namespace nvfp4::jit::detail {

namespace {

constexpr const char* kBiasNames[] = {"none", "bf16", "fp32"};
constexpr const char* kGroupedNames[] = {"none", "contiguous", "masked", "batched"};
constexpr uint8_t kGroupedFlags[] = {0, kFlagGroupedContiguous, kFlagGroupedMasked, kFlagGroupedBatched};
constexpr const char* kEpilogueNames[] = {"none", "swiglu", "moe_combine"};  // by GemmEpilogueCode
constexpr const char* kARmsNormNames[] = {"none", "a_dtype", "fp32"};        // by ARmsNormCode

const char* bias_of(const GemmSpec& spec) {
  const uint8_t bias = gemm_bias_code(spec);
  return bias == nvfp4k::BIAS_BF16 ? kBiasNames[1] : bias == nvfp4k::BIAS_FP32 ? kBiasNames[2] : kBiasNames[0];
}

// The index of `name` in `names`, or -1.
template <size_t N>
int index_of(const char* const (&names)[N], const std::string& name) {
  for (size_t i = 0; i < N; ++i)
    if (name == names[i]) return int(i);
  return -1;
}

int dtype_code(const std::string& name) {
  for (DType d : {DType::bf16, DType::fp16, DType::fp32, DType::nvfp4})
    if (dtype_name(uint8_t(d)) == name) return int(d);
  return -1;
}

int scale_layout_code(const std::string& name) {
  for (int code : {nvfp4k::SCALES_LINEAR, nvfp4k::SCALES_SWIZZLED128X4, nvfp4k::SCALES_PREPACKED})
    if (scale_layout_name(code) == name) return code;
  return -1;
}

// The ranges of a tile's fields: the widest any GEMM backend builds (the backend checks its own
// tiles after this).
constexpr int64_t kMaxTileEdge = 256, kMaxBlockK = 1024, kMaxThreads = 1024, kMaxStages = 32, kMaxSplit = 16;

}  // namespace

nlohmann::ordered_json gemm_spec_json(const GemmSpec& spec) {
  const GemmTile& t = spec.tile;
  nlohmann::ordered_json j{{"n", spec.n},
                           {"k", spec.k},
                           {"groups", spec.groups},
                           {"a_dtype", dtype_name(spec.a_dtype)},
                           {"out_dtype", dtype_name(spec.out_dtype)},
                           {"scale_layout", scale_layout_name(spec.scale_layout)},
                           {"bias", bias_of(spec)},
                           {"grouped", kGroupedNames[gemm_problem_grouped(spec)]},
                           {"a_scale_layout", scale_layout_name(gemm_a_scale_layout(spec))},
                           {"epilogue", kEpilogueNames[gemm_epilogue_code(spec)]},
                           {"precision", spec.flags & kFlagW4A8 ? "w4a8" : "exact"},
                           {"a_rmsnorm", kARmsNormNames[gemm_a_rmsnorm_code(spec)]},
                           {"residual", (spec.flags & kFlagResidual) != 0}};
  j["tile"] = {{"block_m", t.block_m}, {"block_n", t.block_n}, {"block_k", t.block_k}, {"threads", t.threads},
               {"stages", t.stages},   {"split_k", t.split_k}, {"k_slices", t.k_slices}};
  return j;
}

std::string gemm_spec_from_json(const nlohmann::json& object, Arch arch, GemmSpec* spec) {
  static_assert(nvfp4k::GROUPED_NONE == 0 && nvfp4k::GROUPED_CONTIGUOUS == 1 && nvfp4k::GROUPED_MASKED == 2 &&
                nvfp4k::GROUPED_BATCHED == 3);
  FieldReader r(object);
  GemmSpec s;
  s.arch = arch;
  s.n = r.integer("n", 1, INT32_MAX);
  s.k = r.integer("k", 1, INT32_MAX);
  s.groups = int32_t(r.integer("groups", 0, 65536));
  const std::string a = r.text("a_dtype"), out = r.text("out_dtype"), layout = r.text("scale_layout");
  const std::string bias = r.text("bias"), grouped = r.text("grouped"), a_layout = r.text("a_scale_layout");
  // (absent from tables written before the fused epilogue and the W4A8 mode: none, exact)
  const std::string epilogue = object.contains("epilogue") ? r.text("epilogue") : "none";
  const std::string precision = object.contains("precision") ? r.text("precision") : "exact";
  const std::string a_rmsnorm = object.contains("a_rmsnorm") ? r.text("a_rmsnorm") : "none";  // (absent before it)
  if (!r.why().empty()) return r.why();
  if (precision != "exact" && precision != "w4a8") return "precision is not \"exact\" or \"w4a8\"";
  const int a_rmsnorm_code = index_of(kARmsNormNames, a_rmsnorm);
  if (a_rmsnorm_code < 0) return fmt::format("a_rmsnorm = \"{}\" is not none, a_dtype or fp32", a_rmsnorm);
  if (object.contains("residual") && !object["residual"].is_boolean()) return "residual is not true or false";
  const bool residual = object.contains("residual") && object["residual"].get<bool>();  // (absent before it)
  if (!object.contains("tile") || !object["tile"].is_object()) return "tile is missing";
  FieldReader t(object["tile"]);
  s.tile.block_m = uint16_t(t.integer("block_m", 1, kMaxTileEdge));
  s.tile.block_n = uint16_t(t.integer("block_n", 1, kMaxTileEdge));
  s.tile.block_k = uint16_t(t.integer("block_k", 1, kMaxBlockK));
  s.tile.threads = uint16_t(t.integer("threads", 32, kMaxThreads));
  s.tile.stages = uint8_t(t.integer("stages", 1, kMaxStages));
  s.tile.split_k = uint8_t(t.integer("split_k", 0, kMaxSplit));
  s.tile.k_slices = uint8_t(t.integer("k_slices", 0, kMaxSplit));
  if (!t.why().empty()) return "tile." + t.why();
  const int a_code = dtype_code(a), out_code = dtype_code(out), layout_code = scale_layout_code(layout);
  const int bias_index = index_of(kBiasNames, bias), grouped_index = index_of(kGroupedNames, grouped);
  const int a_layout_code = scale_layout_code(a_layout);
  if (a_code < 0) return fmt::format("a_dtype = \"{}\" is not a dtype", a);
  if (out_code < 0) return fmt::format("out_dtype = \"{}\" is not a dtype", out);
  if (layout_code < 0) return fmt::format("scale_layout = \"{}\" is not a scale layout", layout);
  if (bias_index < 0) return fmt::format("bias = \"{}\" is not none, bf16 or fp32", bias);
  if (grouped_index < 0) return fmt::format("grouped = \"{}\" is not none, contiguous, masked or batched", grouped);
  const int epilogue_index = index_of(kEpilogueNames, epilogue);
  if (epilogue_index < 0) return fmt::format("epilogue = \"{}\" is not none, swiglu or moe_combine", epilogue);
  if (a_layout_code != nvfp4k::SCALES_LINEAR && a_layout_code != nvfp4k::SCALES_SWIZZLED128X4)
    return fmt::format("a_scale_layout = \"{}\" is not linear or sw128x4", a_layout);
  s.a_dtype = uint8_t(a_code);
  s.out_dtype = uint8_t(out_code);
  s.scale_layout = uint8_t(layout_code);
  s.flags = uint16_t((bias_index == 1 ? kFlagBiasBf16 : bias_index == 2 ? kFlagBiasFp32 : 0) | kGroupedFlags[grouped_index] |
                     (a_layout_code == nvfp4k::SCALES_SWIZZLED128X4 ? kFlagAScalesSwizzled : 0) |
                     (epilogue_index == 1 ? kFlagEpilogueSwiglu : epilogue_index == 2 ? kFlagEpilogueMoeCombine : 0) | (precision == "w4a8" ? kFlagW4A8 : 0) |
                     (a_rmsnorm_code == nvfp4k::A_RMSNORM_16BIT ? kFlagARmsNorm
                      : a_rmsnorm_code == nvfp4k::A_RMSNORM_FP32 ? kFlagARmsNormFp32 : 0) |
                     (residual ? kFlagResidual : 0));
  *spec = s;
  return {};
}

}  // namespace nvfp4::jit::detail
