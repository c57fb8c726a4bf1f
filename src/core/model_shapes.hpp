// From a checkpoint to the weight shapes one rank of a sharded engine runs: a model directory's
// config.json and ModelOpt NVFP4 quant config (hf_quant_config.json, or config.json's
// quantization_config), a tensor-parallel size tp and an expert-parallel size ep -> the NVFP4
// GEMMs of one rank, as serving engines fuse them (q+k+v, gate+up, MLA's q_a+kv_a), in the
// manifest's types, deduplicated by (N, K, groups).
//
// Sharding: column-parallel layers (qkv, gate_up, q_b, kv_b) divide N by tp, row-parallel ones
// (o_proj, down) divide K by tp; KV heads fewer than tp are replicated (one per rank). Experts:
// with ep > 1 a rank holds E/ep whole experts; with ep == 1 every expert's intermediate is split
// by tp. Modules ModelOpt excludes, routers, lm_head and embeddings are left out.
#pragma once
#include <string>
#include <vector>

#include "core/manifest.hpp"
#include "core/prewarm_variants.hpp"

namespace nvfp4::jit::detail {

struct ModelShapes {
  std::string header;  // comment lines: the model, its quant config, tp and ep
  std::vector<WeightShape> shapes;
};

// Throws Error(invalid_argument) naming the file and field: a missing or unreadable config,
// a model_type not known, a quant config that is not ModelOpt NVFP4 (or none), tp or ep that
// does not divide what it shards, a K that is not a multiple of 16, fused parts of which some
// are excluded and some not. Each shape's variants are `base` with the a-from of its module.
ModelShapes derive_model_shapes(const std::string& model_dir, int tp, int ep, const PrewarmVariants& base = {});

// The shapes as a manifest (parse_manifest reads it back): the header, then one line per shape
// with its `a-from` field.
std::string model_manifest_text(const ModelShapes& model);

// ModelOpt's exclusion patterns, fnmatch-style (`*` any run of characters, dots included; `?`
// one character; no brackets): whether `pattern` names `module` or a module holding it
// (`model.layers.0.mlp` names `model.layers.0.mlp.down_proj`).
bool module_pattern_matches(std::string_view pattern, std::string_view module);

}  // namespace nvfp4::jit::detail
