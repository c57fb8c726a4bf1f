// Shape manifests: the weight shapes (N, K, groups) of a model, one per line, each with the
// variants a deployment runs it in (core/prewarm_variants.hpp), which default to the prewarm's:
//   # comment
//   <name> <N> <K> [groups] [key=value[,value...]]...
//   qkv_proj 6144 4096 bias=bf16 d-dtype=bf16,fp32
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/prewarm_variants.hpp"

namespace nvfp4::jit::detail {

struct WeightShape {
  std::string name;
  int64_t n = 0, k = 0;
  int32_t groups = 1;
  PrewarmVariants variants;
  std::string origin;  // where it was given, for messages: a manifest's "FILE:LINE"; else empty
};

// A manifest file is read whole, once: a path that names something else (a device, a weights
// file) is refused before it is read.
inline constexpr size_t kMaxManifestBytes = size_t(16) << 20;

// Throws Error(invalid_argument) naming "<origin>:<line>", and when no line holds a shape.
// A line's variants start from `base` (the prewarm's flags); its own fields replace those keys.
// Lines of the same shape (N, K, groups and variants) are merged into the first.
std::vector<WeightShape> parse_manifest(std::string_view text, std::string_view origin, const PrewarmVariants& base = {});
// A built-in manifest ("llama-3.1-8b", ...) or a manifest file's path: a regular file (or a
// symlink to one) of at most kMaxManifestBytes.
std::vector<WeightShape> load_manifest(const std::string& name_or_path, const PrewarmVariants& base = {});
std::vector<std::string> builtin_manifest_names();
// `shapes` without those equal to an earlier one in N, K, groups and variants (names and
// origins aside: they compile the same kernels), in their order.
std::vector<WeightShape> merge_duplicate_shapes(std::vector<WeightShape> shapes);
// Why (N, K, groups) is no weight shape ("" when it is): N and K 1 to 2^31 - 1, K a multiple of
// 16, groups 1 to 65536.
std::string weight_shape_problem(int64_t n, int64_t k, int64_t groups);
// "N,K" or "N,K,G", in the variants `base`.
WeightShape parse_shape(std::string_view text, const PrewarmVariants& base = {});

}  // namespace nvfp4::jit::detail
