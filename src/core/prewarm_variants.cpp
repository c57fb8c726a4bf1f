#include "core/prewarm_variants.hpp"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

namespace nvfp4::jit::detail {

namespace {

template <class T>
using Names = std::vector<std::pair<std::string_view, T>>;

const Names<DType> kDTypes = {{"bf16", DType::bf16}, {"fp16", DType::fp16}, {"fp32", DType::fp32}, {"nvfp4", DType::nvfp4}};
const Names<uint8_t> kBiases = {{"none", kNoDType}, {"bf16", uint8_t(DType::bf16)}, {"fp32", uint8_t(DType::fp32)}};
const Names<WeightLayout> kWeightLayouts = {
    {"linear", WeightLayout::linear}, {"swizzled", WeightLayout::swizzled}, {"prepacked", WeightLayout::prepacked}};
const Names<ScaleLayout> kScaleLayouts = {{"linear", ScaleLayout::linear}, {"swizzled", ScaleLayout::swizzled128x4}};
const Names<GroupedLayout> kGroupedLayouts = {{"contiguous", GroupedLayout::contiguous}, {"masked", GroupedLayout::masked}};
const Names<AFrom> kAFrom = {{"quantize", AFrom::quantize}, {"rmsnorm", AFrom::rmsnorm}, {"swiglu", AFrom::swiglu},
                             {"mhc", AFrom::mhc},           {"stage", AFrom::moe_stage}};
const Names<NormWeight> kNormWeights = {{"input", NormWeight::input}, {"fp32", NormWeight::fp32}};
const Names<GemmEpilogue> kEpilogues = {
    {"none", GemmEpilogue::none}, {"swiglu", GemmEpilogue::swiglu}, {"moe-combine", GemmEpilogue::moe_combine}};
const Names<GemmPrecision> kPrecisions = {{"exact", GemmPrecision::exact}, {"w4a8", GemmPrecision::w4a8}};
const Names<GemmARmsNorm> kARmsNorms = {
    {"none", GemmARmsNorm::none}, {"input", GemmARmsNorm::input}, {"fp32", GemmARmsNorm::fp32}};
const Names<GemmResidual> kResiduals = {{"none", GemmResidual::none}, {"add", GemmResidual::add}};

template <class T>
std::string_view name_of(const Names<T>& names, T value) {
  for (const auto& [name, v] : names)
    if (v == value) return name;
  return "?";
}

// `values` parsed into `out` from `names`, each one of `allowed` (a subset of the names).
template <class T>
std::string parse_list(std::string_view key, std::string_view values, const Names<T>& names,
                       std::initializer_list<std::string_view> allowed, std::vector<T>& out) {
  std::vector<T> list;
  std::string choices;
  for (std::string_view a : allowed) choices += fmt::format("{}{}", choices.empty() ? "" : ", ", a);
  for (size_t start = 0; start <= values.size();) {
    const size_t end = std::min(values.find(',', start), values.size());
    const std::string_view word = values.substr(start, end - start);
    start = end + 1;
    const bool known = std::find(allowed.begin(), allowed.end(), word) != allowed.end();
    const auto it = std::find_if(names.begin(), names.end(), [&](const auto& n) { return n.first == word; });
    if (!known || it == names.end()) return fmt::format("{}: `{}` is not one of {}", key, word, choices);
    if (std::find(list.begin(), list.end(), it->second) != list.end())
      return fmt::format("{}: `{}` is given twice", key, word);
    list.push_back(it->second);
  }
  out = std::move(list);
  return {};
}

}  // namespace

std::string_view variant_name(DType dtype) { return name_of(kDTypes, dtype); }
std::string_view variant_name(WeightLayout layout) { return name_of(kWeightLayouts, layout); }
std::string_view variant_name(ScaleLayout layout) { return name_of(kScaleLayouts, layout); }
std::string_view variant_name(GroupedLayout layout) { return name_of(kGroupedLayouts, layout); }
std::string_view variant_name(GemmPrecision precision) { return name_of(kPrecisions, precision); }
std::string_view bias_variant_name(uint8_t bias) { return name_of(kBiases, bias); }
std::string_view variant_name(GemmEpilogue epilogue) { return name_of(kEpilogues, epilogue); }
std::string_view variant_name(GemmARmsNorm rmsnorm) { return name_of(kARmsNorms, rmsnorm); }
std::string_view variant_name(GemmResidual residual) { return name_of(kResiduals, residual); }

std::string a_from_names(const std::vector<AFrom>& ops) {
  std::string out;
  for (AFrom op : ops) out += fmt::format("{}{}", out.empty() ? "" : ",", name_of(kAFrom, op));
  return out;
}

bool PrewarmVariants::writes_a(AFrom op) const { return std::find(a_from.begin(), a_from.end(), op) != a_from.end(); }

std::string set_prewarm_variant(PrewarmVariants& v, std::string_view key, std::string_view values) {
  if (key == "a-dtype") return parse_list(key, values, kDTypes, {"bf16", "fp16", "nvfp4"}, v.a_dtypes);
  if (key == "d-dtype") return parse_list(key, values, kDTypes, {"bf16", "fp16", "fp32", "nvfp4"}, v.d_dtypes);
  if (key == "bias") return parse_list(key, values, kBiases, {"none", "bf16", "fp32"}, v.biases);
  if (key == "b-layout") return parse_list(key, values, kWeightLayouts, {"linear", "swizzled", "prepacked"}, v.b_layouts);
  if (key == "a-scales") return parse_list(key, values, kScaleLayouts, {"linear", "swizzled"}, v.a_scales);
  if (key == "grouped") return parse_list(key, values, kGroupedLayouts, {"contiguous", "masked"}, v.grouped);
  if (key == "in-dtype") return parse_list(key, values, kDTypes, {"bf16", "fp16", "fp32"}, v.in_dtypes);
  if (key == "a-from") return parse_list(key, values, kAFrom, {"quantize", "rmsnorm", "swiglu", "mhc", "stage"}, v.a_from);
  if (key == "norm-weight") return parse_list(key, values, kNormWeights, {"input", "fp32"}, v.norm_weights);
  if (key == "epilogue") return parse_list(key, values, kEpilogues, {"none", "swiglu", "moe-combine"}, v.epilogues);
  if (key == "precision") return parse_list(key, values, kPrecisions, {"exact", "w4a8"}, v.precisions);
  if (key == "a-rmsnorm") return parse_list(key, values, kARmsNorms, {"none", "input", "fp32"}, v.a_rmsnorms);
  if (key == "residual") return parse_list(key, values, kResiduals, {"none", "add"}, v.residuals);
  std::string keys;
  for (std::string_view k : kPrewarmVariantKeys) keys += fmt::format("{}{}", keys.empty() ? "" : ", ", k);
  return fmt::format("`{}` is not a variant ({})", key, keys);
}

std::string set_prewarm_variants(PrewarmVariants& variants, std::string_view fields) {
  for (size_t start = 0; start < fields.size();) {
    const size_t at = fields.find_first_not_of(" \t", start);
    if (at == std::string_view::npos) break;
    const size_t end = std::min(fields.find_first_of(" \t", at), fields.size());
    const std::string_view field = fields.substr(at, end - at);
    start = end;
    const size_t eq = field.find('=');
    if (eq == std::string_view::npos) return fmt::format("`{}` is not `key=value[,value...]`", field);
    if (std::string why = set_prewarm_variant(variants, field.substr(0, eq), field.substr(eq + 1)); !why.empty()) return why;
  }
  return {};
}

}  // namespace nvfp4::jit::detail
