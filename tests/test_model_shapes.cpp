// From a checkpoint's config to the shapes one rank runs: each family with its real model's
// numbers, the expected shapes worked out here by hand from those numbers.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <tuple>

#include "core/manifest.hpp"
#include "core/model_shapes.hpp"
#include "expect_error.hpp"
#include "test_util.hpp"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;

namespace {

struct Expected {
  std::string name;
  int64_t n, k;
  int32_t groups;
  std::vector<AFrom> a_from;
};

const std::vector<AFrom> kNorm{AFrom::rmsnorm, AFrom::quantize}, kQuant{AFrom::quantize},
    kSwiglu{AFrom::swiglu, AFrom::quantize}, kMoeStage{AFrom::moe_stage, AFrom::rmsnorm, AFrom::quantize};

// A model directory: config.json and, unless empty, hf_quant_config.json.
struct Model {
  testutil::TempDir dir;
  Model(const std::string& config, const std::string& quant) {
    write("config.json", config);
    if (!quant.empty()) write("hf_quant_config.json", quant);
  }
  void write(const std::string& name, const std::string& text) const { std::ofstream(dir.path / name) << text; }
  std::string str() const { return dir.str(); }
};

std::string modelopt(const std::string& exclude = R"(["lm_head"])") {
  return R"({"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4", "group_size": 16, "exclude_modules": )" +
         exclude + "}}";
}

// The derived shapes are exactly `expected` (in any order), each with its a-from.
void check_shapes(const std::string& dir, int tp, int ep, const std::vector<Expected>& expected) {
  CAPTURE(tp);
  CAPTURE(ep);
  const std::vector<WeightShape> got = derive_model_shapes(dir, tp, ep).shapes;
  std::string names;
  for (const WeightShape& s : got) names += s.name + " ";
  CAPTURE(names);
  CHECK(got.size() == expected.size());
  for (const Expected& e : expected) {
    CAPTURE(e.name);
    const auto it = std::find_if(got.begin(), got.end(), [&](const WeightShape& s) { return s.name == e.name; });
    REQUIRE(it != got.end());
    CHECK(it->n == e.n);
    CHECK(it->k == e.k);
    CHECK(it->groups == e.groups);
    CHECK(it->variants.a_from == e.a_from);
  }
}

void expect_model_error(const std::string& dir, int tp, int ep, const char* text) {
  testutil::expect_error(dir, [&](const std::string& d) { derive_model_shapes(d, tp, ep); }, Status::invalid_argument, text);
}

const char* kLlama70b = R"({"model_type": "llama", "hidden_size": 8192, "intermediate_size": 28672,
  "num_attention_heads": 64, "num_key_value_heads": 8, "num_hidden_layers": 80, "vocab_size": 128256})";
const char* kQwen3_8b = R"({"model_type": "qwen3", "hidden_size": 4096, "intermediate_size": 12288, "head_dim": 128,
  "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 36})";
const char* kQwen3_30b = R"({"model_type": "qwen3_moe", "hidden_size": 2048, "intermediate_size": 6144, "head_dim": 128,
  "moe_intermediate_size": 768, "num_experts": 128, "num_experts_per_tok": 8, "decoder_sparse_step": 1,
  "mlp_only_layers": [], "num_attention_heads": 32, "num_key_value_heads": 4, "num_hidden_layers": 48})";
const char* kDeepSeekV3 = R"({"model_type": "deepseek_v3", "hidden_size": 7168, "intermediate_size": 18432,
  "moe_intermediate_size": 2048, "num_attention_heads": 128, "num_key_value_heads": 128, "q_lora_rank": 1536,
  "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "n_routed_experts": 256,
  "n_shared_experts": 1, "first_k_dense_replace": 3, "moe_layer_freq": 1, "num_hidden_layers": 61})";
const char* kGptOss120b = R"({"model_type": "gpt_oss", "hidden_size": 2880, "intermediate_size": 2880, "head_dim": 64,
  "num_attention_heads": 64, "num_key_value_heads": 8, "num_local_experts": 128, "num_hidden_layers": 36})";
const char* kMixtral8x7b = R"({"model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336,
  "num_attention_heads": 32, "num_key_value_heads": 8, "num_local_experts": 8, "num_hidden_layers": 32})";

// config with `field` replaced by `value` (a JSON literal), or removed when `value` is empty.
std::string with(std::string config, const std::string& field, const std::string& value) {
  const size_t at = config.find("\"" + field + "\"");
  REQUIRE(at != std::string::npos);
  size_t end = config.find_first_of(",}", at);
  if (config[end] == ',' && value.empty()) ++end;
  config.replace(at, end - at, value.empty() ? "" : "\"" + field + "\": " + value);
  return config;
}

// config with the field `field` added.
std::string adding(std::string config, const std::string& field, const std::string& value) {
  return config.insert(config.rfind('}'), ", \"" + field + "\": " + value);
}

}  // namespace

TEST_SUITE("model_shapes") {
  TEST_CASE("Llama-3.1-70B at tp 1 and tp 8 (DESIGN.md's worked example)") {
    const Model m(kLlama70b, modelopt());
    check_shapes(m.str(), 1, 1,
                 {{"model.layers.*.self_attn.qkv_proj", (64 + 2 * 8) * 128, 8192, 1, kNorm},
                  {"model.layers.*.self_attn.o_proj", 8192, 64 * 128, 1, kQuant},
                  {"model.layers.*.mlp.gate_up_proj", 2 * 28672, 8192, 1, kNorm},
                  {"model.layers.*.mlp.down_proj", 8192, 28672, 1, kSwiglu}});
    check_shapes(m.str(), 8, 1,
                 {{"model.layers.*.self_attn.qkv_proj", (64 + 2 * 8) * 128 / 8, 8192, 1, kNorm},
                  {"model.layers.*.self_attn.o_proj", 8192, 64 * 128 / 8, 1, kQuant},
                  {"model.layers.*.mlp.gate_up_proj", 2 * 28672 / 8, 8192, 1, kNorm},
                  {"model.layers.*.mlp.down_proj", 8192, 28672 / 8, 1, kSwiglu}});
  }

  TEST_CASE("Qwen3-8B at tp 1 and tp 8; head_dim from the config") {
    const Model m(kQwen3_8b, modelopt());
    check_shapes(m.str(), 1, 1,
                 {{"model.layers.*.self_attn.qkv_proj", (32 + 2 * 8) * 128, 4096, 1, kNorm},
                  {"model.layers.*.self_attn.o_proj", 4096, 32 * 128, 1, kQuant},
                  {"model.layers.*.mlp.gate_up_proj", 2 * 12288, 4096, 1, kNorm},
                  {"model.layers.*.mlp.down_proj", 4096, 12288, 1, kSwiglu}});
    check_shapes(m.str(), 8, 1,
                 {{"model.layers.*.self_attn.qkv_proj", (32 / 8 + 2 * 8 / 8) * 128, 4096, 1, kNorm},
                  {"model.layers.*.self_attn.o_proj", 4096, 32 * 128 / 8, 1, kQuant},
                  {"model.layers.*.mlp.gate_up_proj", 2 * 12288 / 8, 4096, 1, kNorm},
                  {"model.layers.*.mlp.down_proj", 4096, 12288 / 8, 1, kSwiglu}});
  }

  TEST_CASE("Qwen3-30B-A3B at tp 1, tp 8 (4 KV heads replicated, experts split) and tp 8 ep 8") {
    const Model m(kQwen3_30b, modelopt(R"(["lm_head", "model.layers.*.mlp.gate"])"));
    check_shapes(m.str(), 1, 1,
                 {{"model.layers.*.self_attn.qkv_proj", (32 + 2 * 4) * 128, 2048, 1, kNorm},
                  {"model.layers.*.self_attn.o_proj", 2048, 32 * 128, 1, kQuant},
                  {"model.layers.*.mlp.experts.gate_up_proj", 2 * 768, 2048, 128, kMoeStage},
                  {"model.layers.*.mlp.experts.down_proj", 2048, 768, 128, kSwiglu}});
    check_shapes(m.str(), 8, 1,
                 {{"model.layers.*.self_attn.qkv_proj", (32 / 8 + 2 * 1) * 128, 2048, 1, kNorm},
                  {"model.layers.*.self_attn.o_proj", 2048, 32 * 128 / 8, 1, kQuant},
                  {"model.layers.*.mlp.experts.gate_up_proj", 2 * 768 / 8, 2048, 128, kMoeStage},
                  {"model.layers.*.mlp.experts.down_proj", 2048, 768 / 8, 128, kSwiglu}});
    check_shapes(m.str(), 8, 8,
                 {{"model.layers.*.self_attn.qkv_proj", (32 / 8 + 2 * 1) * 128, 2048, 1, kNorm},
                  {"model.layers.*.self_attn.o_proj", 2048, 32 * 128 / 8, 1, kQuant},
                  {"model.layers.*.mlp.experts.gate_up_proj", 2 * 768, 2048, 128 / 8, kMoeStage},
                  {"model.layers.*.mlp.experts.down_proj", 2048, 768, 128 / 8, kSwiglu}});
  }

  TEST_CASE("Qwen3-MoE: decoder_sparse_step and mlp_only_layers make dense layers, named by their layers") {
    // 4 layers, sparse where (i + 1) % 2 == 0 (1 and 3), but 1 is listed dense: experts on layer 3 only
    const Model m(with(with(with(kQwen3_30b, "num_hidden_layers", "4"), "decoder_sparse_step", "2"), "mlp_only_layers", "[1]"),
                  modelopt());
    check_shapes(m.str(), 1, 1,
                 {{"model.layers.*.self_attn.qkv_proj", (32 + 2 * 4) * 128, 2048, 1, kNorm},
                  {"model.layers.*.self_attn.o_proj", 2048, 32 * 128, 1, kQuant},
                  {"model.layers.0-2.mlp.gate_up_proj", 2 * 6144, 2048, 1, kNorm},
                  {"model.layers.0-2.mlp.down_proj", 2048, 6144, 1, kSwiglu},
                  {"model.layers.3.mlp.experts.gate_up_proj", 2 * 768, 2048, 128, kMoeStage},
                  {"model.layers.3.mlp.experts.down_proj", 2048, 768, 128, kSwiglu}});
  }

  TEST_CASE("DeepSeek-V3 at tp 1 and tp 8: MLA, dense first layers, routed and shared experts") {
    const Model m(kDeepSeekV3, modelopt());
    check_shapes(m.str(), 1, 1,
                 {{"model.layers.*.self_attn.fused_qkv_a_proj", 1536 + 512 + 64, 7168, 1, kNorm},
                  {"model.layers.*.self_attn.q_b_proj", 128 * (128 + 64), 1536, 1, kNorm},
                  {"model.layers.*.self_attn.kv_b_proj", 128 * (128 + 128), 512, 1, kNorm},
                  {"model.layers.*.self_attn.o_proj", 7168, 128 * 128, 1, kQuant},
                  {"model.layers.0-2.mlp.gate_up_proj", 2 * 18432, 7168, 1, kNorm},
                  {"model.layers.0-2.mlp.down_proj", 7168, 18432, 1, kSwiglu},
                  {"model.layers.3-60.mlp.experts.gate_up_proj", 2 * 2048, 7168, 256, kMoeStage},
                  {"model.layers.3-60.mlp.experts.down_proj", 7168, 2048, 256, kSwiglu},
                  {"model.layers.3-60.mlp.shared_experts.gate_up_proj", 2 * 2048 * 1, 7168, 1, kNorm},
                  {"model.layers.3-60.mlp.shared_experts.down_proj", 7168, 2048 * 1, 1, kSwiglu}});
    check_shapes(m.str(), 8, 1,
                 {{"model.layers.*.self_attn.fused_qkv_a_proj", 1536 + 512 + 64, 7168, 1, kNorm},  // replicated
                  {"model.layers.*.self_attn.q_b_proj", 128 * (128 + 64) / 8, 1536, 1, kNorm},
                  {"model.layers.*.self_attn.kv_b_proj", 128 * (128 + 128) / 8, 512, 1, kNorm},
                  {"model.layers.*.self_attn.o_proj", 7168, 128 * 128 / 8, 1, kQuant},
                  {"model.layers.0-2.mlp.gate_up_proj", 2 * 18432 / 8, 7168, 1, kNorm},
                  {"model.layers.0-2.mlp.down_proj", 7168, 18432 / 8, 1, kSwiglu},
                  {"model.layers.3-60.mlp.experts.gate_up_proj", 2 * 2048 / 8, 7168, 256, kMoeStage},
                  {"model.layers.3-60.mlp.experts.down_proj", 7168, 2048 / 8, 256, kSwiglu},
                  {"model.layers.3-60.mlp.shared_experts.gate_up_proj", 2 * 2048 / 8, 7168, 1, kNorm},
                  {"model.layers.3-60.mlp.shared_experts.down_proj", 7168, 2048 / 8, 1, kSwiglu}});
  }

  TEST_CASE("DeepSeek-V3 at tp 8 ep 8 with ModelOpt's attention exclusion: no attention GEMM") {
    const Model m(kDeepSeekV3, modelopt(R"(["lm_head", "model.layers.*.self_attn*"])"));
    check_shapes(m.str(), 8, 8,
                 {{"model.layers.0-2.mlp.gate_up_proj", 2 * 18432 / 8, 7168, 1, kNorm},
                  {"model.layers.0-2.mlp.down_proj", 7168, 18432 / 8, 1, kSwiglu},
                  {"model.layers.3-60.mlp.experts.gate_up_proj", 2 * 2048, 7168, 256 / 8, kMoeStage},
                  {"model.layers.3-60.mlp.experts.down_proj", 7168, 2048, 256 / 8, kSwiglu},
                  {"model.layers.3-60.mlp.shared_experts.gate_up_proj", 2 * 2048 / 8, 7168, 1, kNorm},
                  {"model.layers.3-60.mlp.shared_experts.down_proj", 7168, 2048 / 8, 1, kSwiglu}});
  }

  TEST_CASE("DeepSeek with q_lora_rank null (V2-Lite): a plain q_proj and kv_a_proj_with_mqa") {
    const Model m(R"({"model_type": "deepseek_v2", "hidden_size": 2048, "intermediate_size": 10944,
      "moe_intermediate_size": 1408, "num_attention_heads": 16, "q_lora_rank": null, "kv_lora_rank": 512,
      "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "n_routed_experts": 64,
      "n_shared_experts": 2, "first_k_dense_replace": 1, "num_hidden_layers": 27})",
                  modelopt());
    check_shapes(m.str(), 1, 1,
                 {{"model.layers.*.self_attn.q_proj", 16 * (128 + 64), 2048, 1, kNorm},
                  {"model.layers.*.self_attn.kv_a_proj_with_mqa", 512 + 64, 2048, 1, kNorm},
                  {"model.layers.*.self_attn.kv_b_proj", 16 * (128 + 128), 512, 1, kNorm},
                  {"model.layers.*.self_attn.o_proj", 2048, 16 * 128, 1, kQuant},
                  {"model.layers.0.mlp.gate_up_proj", 2 * 10944, 2048, 1, kNorm},
                  {"model.layers.0.mlp.down_proj", 2048, 10944, 1, kSwiglu},
                  {"model.layers.1-26.mlp.experts.gate_up_proj", 2 * 1408, 2048, 64, kMoeStage},
                  {"model.layers.1-26.mlp.experts.down_proj", 2048, 1408, 64, kSwiglu},
                  {"model.layers.1-26.mlp.shared_experts.gate_up_proj", 2 * 1408 * 2, 2048, 1, kNorm},
                  {"model.layers.1-26.mlp.shared_experts.down_proj", 2048, 1408 * 2, 1, kSwiglu}});
  }

  TEST_CASE("gpt-oss-120b at tp 1 and tp 8 ep 8; at tp 8 ep 1 its experts' K is no multiple of 16") {
    const Model m(kGptOss120b, modelopt());
    check_shapes(m.str(), 1, 1,
                 {{"model.layers.*.self_attn.qkv_proj", (64 + 2 * 8) * 64, 2880, 1, kNorm},
                  {"model.layers.*.self_attn.o_proj", 2880, 64 * 64, 1, kQuant},
                  {"model.layers.*.mlp.experts.gate_up_proj", 2 * 2880, 2880, 128, kMoeStage},
                  {"model.layers.*.mlp.experts.down_proj", 2880, 2880, 128, kSwiglu}});
    check_shapes(m.str(), 8, 8,
                 {{"model.layers.*.self_attn.qkv_proj", (64 / 8 + 2 * 8 / 8) * 64, 2880, 1, kNorm},
                  {"model.layers.*.self_attn.o_proj", 2880, 64 * 64 / 8, 1, kQuant},
                  {"model.layers.*.mlp.experts.gate_up_proj", 2 * 2880, 2880, 128 / 8, kMoeStage},
                  {"model.layers.*.mlp.experts.down_proj", 2880, 2880, 128 / 8, kSwiglu}});
    // 2880 / 8 = 360 = 22.5 blocks of 16
    expect_model_error(m.str(), 8, 1, "K = 360 (intermediate_size 2880 / tp 8), not a multiple of 16");
  }

  TEST_CASE("Mixtral-8x7B at tp 1, tp 8 and tp 8 ep 8: block_sparse_moe.experts.<e>.w1/w3/w2") {
    const Model m(kMixtral8x7b, modelopt(R"(["lm_head", "model.layers.*.block_sparse_moe.gate"])"));
    check_shapes(m.str(), 1, 1,
                 {{"model.layers.*.self_attn.qkv_proj", (32 + 2 * 8) * 128, 4096, 1, kNorm},
                  {"model.layers.*.self_attn.o_proj", 4096, 32 * 128, 1, kQuant},
                  {"model.layers.*.block_sparse_moe.experts.w13", 2 * 14336, 4096, 8, kMoeStage},
                  {"model.layers.*.block_sparse_moe.experts.w2", 4096, 14336, 8, kSwiglu}});
    check_shapes(m.str(), 8, 1,
                 {{"model.layers.*.self_attn.qkv_proj", (32 / 8 + 2 * 8 / 8) * 128, 4096, 1, kNorm},
                  {"model.layers.*.self_attn.o_proj", 4096, 32 * 128 / 8, 1, kQuant},
                  {"model.layers.*.block_sparse_moe.experts.w13", 2 * 14336 / 8, 4096, 8, kMoeStage},
                  {"model.layers.*.block_sparse_moe.experts.w2", 4096, 14336 / 8, 8, kSwiglu}});
    check_shapes(m.str(), 8, 8,
                 {{"model.layers.*.self_attn.qkv_proj", (32 / 8 + 2 * 8 / 8) * 128, 4096, 1, kNorm},
                  {"model.layers.*.self_attn.o_proj", 4096, 32 * 128 / 8, 1, kQuant},
                  {"model.layers.*.block_sparse_moe.experts.w13", 2 * 14336, 4096, 8 / 8, kMoeStage},
                  {"model.layers.*.block_sparse_moe.experts.w2", 4096, 14336, 8 / 8, kSwiglu}});
  }

  TEST_CASE("a-from given with a model is refused, not ignored") {
    const Model m(R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 32,
      "num_attention_heads": 2, "num_key_value_heads": 2, "num_hidden_layers": 1})",
                  modelopt());
    PrewarmVariants base;
    REQUIRE(set_prewarm_variant(base, "a-from", "quantize").empty());
    CHECK_THROWS_WITH_AS(derive_model_shapes(m.str(), 1, 1, base), doctest::Contains("a-from: with a model"), Error);
  }

  TEST_CASE("the built-in llama-3.1-8b manifest is what Llama-3.1-8B's config derives at tp 1") {
    const Model m(R"({"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
      "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32})",
                  modelopt());
    std::set<std::tuple<int64_t, int64_t, int32_t>> derived, builtin;
    for (const WeightShape& s : derive_model_shapes(m.str(), 1, 1).shapes) derived.insert({s.n, s.k, s.groups});
    for (const WeightShape& s : load_manifest("llama-3.1-8b")) builtin.insert({s.n, s.k, s.groups});
    CHECK(derived == builtin);
  }

  TEST_CASE("a config.json quantization_config (modelopt, `ignore`) serves as the quant config") {
    const Model m(adding(kLlama70b, "quantization_config",
                         R"({"quant_method": "modelopt", "quant_algo": "NVFP4", "ignore": ["lm_head", "model.layers.*.mlp*"]})"),
                  "");
    check_shapes(m.str(), 8, 1,
                 {{"model.layers.*.self_attn.qkv_proj", (64 + 2 * 8) * 128 / 8, 8192, 1, kNorm},
                  {"model.layers.*.self_attn.o_proj", 8192, 64 * 128 / 8, 1, kQuant}});
  }

  TEST_CASE("excluded modules are absent, their layers named; a parent module's pattern excludes its children") {
    const std::string small = with(kLlama70b, "num_hidden_layers", "4");
    const Model m(small, modelopt(R"(["model.layers.0.mlp", "model.layers.3.self_attn*"])"));
    check_shapes(m.str(), 1, 1,
                 {{"model.layers.0-2.self_attn.qkv_proj", (64 + 2 * 8) * 128, 8192, 1, kNorm},
                  {"model.layers.0-2.self_attn.o_proj", 8192, 64 * 128, 1, kQuant},
                  {"model.layers.1-3.mlp.gate_up_proj", 2 * 28672, 8192, 1, kNorm},
                  {"model.layers.1-3.mlp.down_proj", 8192, 28672, 1, kSwiglu}});
    const Model none(small, modelopt(R"(["model.layers.*"])"));
    expect_model_error(none.str(), 1, 1, "every linear layer of llama is excluded");
  }

  TEST_CASE("shapes several modules share are one line naming them all, with every quantizer they need") {
    // hidden 4096 and 32 heads of 128: o_proj [4096, 4096]; intermediate 2048 at tp 1: gate_up
    // [4096, 4096] as well
    const Model m(R"({"model_type": "llama", "hidden_size": 4096, "intermediate_size": 2048,
      "num_attention_heads": 32, "num_key_value_heads": 32, "num_hidden_layers": 2})",
                  modelopt());
    check_shapes(m.str(), 1, 1,
                 {{"model.layers.*.self_attn.qkv_proj", (32 + 2 * 32) * 128, 4096, 1, kNorm},
                  {"model.layers.*.self_attn.o_proj+model.layers.*.mlp.gate_up_proj", 4096, 4096, 1,
                   {AFrom::quantize, AFrom::rmsnorm}},
                  {"model.layers.*.mlp.down_proj", 4096, 2048, 1, kSwiglu}});
  }

  TEST_CASE("fused parts of which some are excluded are an error naming both modules") {
    const Model m(kLlama70b, modelopt(R"(["model.layers.5.self_attn.k_proj"])"));
    expect_model_error(m.str(), 1, 1, "model.layers.5.self_attn.k_proj is excluded (`model.layers.5.self_attn.k_proj`) but "
                                      "model.layers.5.self_attn.q_proj is not");
    const Model experts(kMixtral8x7b, modelopt(R"(["model.layers.2.block_sparse_moe.experts.7.w2"])"));
    expect_model_error(experts.str(), 1, 1, "model.layers.2.block_sparse_moe.experts.7.w2 is excluded");
  }

  TEST_CASE("tp and ep that do not divide what they shard are errors naming the field") {
    const Model llama(kLlama70b, modelopt());
    expect_model_error(llama.str(), 3, 1, "config.json: num_attention_heads 64 is not divisible by tp 3");
    expect_model_error(llama.str(), 1, 8, "ep 8 shards experts, and model_type `llama` has none");
    expect_model_error(llama.str(), 0, 1, "tp = 0");
    expect_model_error(llama.str(), 1, -1, "ep = -1");
    const Model ds(kDeepSeekV3, modelopt());
    expect_model_error(ds.str(), 1, 3, "config.json: n_routed_experts 256 is not divisible by ep 3");
    const Model kv(with(kLlama70b, "num_key_value_heads", "6"), modelopt());  // 64 heads split by 4 and 8; 6 KV heads not
    expect_model_error(kv.str(), 4, 1, "num_key_value_heads 6 is not divisible by tp 4");
    expect_model_error(kv.str(), 8, 1, "num_key_value_heads 6 is fewer than tp 8 but does not divide it");
    const Model inter(with(kLlama70b, "intermediate_size", "28671"), modelopt());
    expect_model_error(inter.str(), 2, 1, "intermediate_size 28671 is not divisible by tp 2");
    const Model odd(with(kLlama70b, "intermediate_size", "28680"), modelopt());  // 28680 / 4 = 7170 = 448.125 x 16
    expect_model_error(odd.str(), 4, 1, "model.layers.0.mlp.down_proj would have K = 7170 (intermediate_size 28680 / tp 4)");
  }

  TEST_CASE("bad configs: errors name the file and the field") {
    expect_model_error(Model(with(kLlama70b, "model_type", R"("gpt2")"), modelopt()).str(), 1, 1,
                       "config.json: model_type `gpt2` is not one nvfp4-jit knows (llama, mistral, qwen2, qwen3, qwen3_moe, "
                       "deepseek_v2, deepseek_v3, kimi_k2, gpt_oss, mixtral)");
    expect_model_error(Model(with(kLlama70b, "hidden_size", ""), modelopt()).str(), 1, 1,
                       "config.json: missing field `hidden_size`");
    expect_model_error(Model(with(kLlama70b, "hidden_size", "-8"), modelopt()).str(), 1, 1,
                       "config.json: hidden_size is -8, not an integer 1 to");
    expect_model_error(Model(with(kLlama70b, "hidden_size", R"("8192")"), modelopt()).str(), 1, 1,
                       "config.json: hidden_size is \"8192\", not an integer");
    expect_model_error(Model(with(kDeepSeekV3, "kv_lora_rank", ""), modelopt()).str(), 1, 1, "missing field `kv_lora_rank`");
    expect_model_error(Model(kLlama70b, R"({"quantization": {"quant_algo": "FP8"}})").str(), 1, 1,
                       "hf_quant_config.json: quantization.quant_algo is `FP8`, not NVFP4");
    expect_model_error(Model(kLlama70b, R"({"quantization": {"quant_algo": "NVFP4", "group_size": 32}})").str(), 1, 1,
                       "hf_quant_config.json: quantization.group_size is 32, not 16");
    expect_model_error(Model(kLlama70b, R"({"producer": {}})").str(), 1, 1,
                       "hf_quant_config.json: missing field `quantization`");
    expect_model_error(Model(kLlama70b, "").str(), 1, 1, "no quantization config");
    expect_model_error(Model(adding(kLlama70b, "quantization_config", R"({"quant_method": "fp8"})"), "").str(), 1, 1,
                       "config.json: quantization_config.quant_method is `fp8`, not modelopt");
    expect_model_error(Model("{\"model_type\": \"llama\",\n  \"hidden_size\": 8192,,}", modelopt()).str(), 1, 1,
                       "config.json: not valid JSON: parse error at line 2, column");
    expect_model_error(Model("[1, 2]", modelopt()).str(), 1, 1, "config.json: not a JSON object");
    testutil::TempDir empty;
    expect_model_error(empty.str(), 1, 1, "config.json: no such file");
  }

  TEST_CASE("config files must be regular files of bounded size: a FIFO, a directory, an oversized file are refused") {
    const Model fifo(kLlama70b, "");
    std::filesystem::remove(fifo.dir.path / "config.json");
    REQUIRE(::mkfifo((fifo.dir.path / "config.json").c_str(), 0600) == 0);
    expect_model_error(fifo.str(), 1, 1, "config.json is a FIFO, not a regular file");  // and it did not block
    const Model dir(kLlama70b, "");
    std::filesystem::create_directory(dir.dir.path / "hf_quant_config.json");
    expect_model_error(dir.str(), 1, 1, "hf_quant_config.json is a directory, not a regular file");
    const Model big(kLlama70b, "");
    REQUIRE(::truncate((big.dir.path / "config.json").c_str(), (16 << 20) + 1) == 0);
    expect_model_error(big.str(), 1, 1, "over the limit");
  }

  TEST_CASE("a model path that is a file, not a directory, is named as such") {
    const Model m(kLlama70b, modelopt());
    const std::string file = (m.dir.path / "config.json").string();
    expect_model_error(file, 1, 1, "config.json is a regular file, not a model directory");
  }

  TEST_CASE("a config.json that is a symlink (a download cache's layout) is followed") {
    const Model m(kLlama70b, modelopt());
    testutil::TempDir link;
    std::filesystem::create_symlink(m.dir.path / "config.json", link.path / "config.json");
    std::filesystem::create_symlink(m.dir.path / "hf_quant_config.json", link.path / "hf_quant_config.json");
    CHECK(derive_model_shapes(link.str(), 1, 1).shapes.size() == 4);
  }

  TEST_CASE("exclusion patterns: fnmatch globs over a module or a module holding it") {
    CHECK(module_pattern_matches("model.layers.*.self_attn*", "model.layers.3.self_attn.q_proj"));
    CHECK(module_pattern_matches("lm_head", "lm_head"));
    CHECK_FALSE(module_pattern_matches("lm_head", "lm_head_2"));
    CHECK(module_pattern_matches("model.layers.0.mlp*", "model.layers.0.mlp.experts.7.down_proj"));
    CHECK_FALSE(module_pattern_matches("model.layers.1.mlp*", "model.layers.10.mlp.down_proj"));
    CHECK(module_pattern_matches("model.layers.1", "model.layers.1.mlp.down_proj"));
    CHECK_FALSE(module_pattern_matches("model.layers.1", "model.layers.10.mlp.down_proj"));
    CHECK(module_pattern_matches("*.experts.?.w2", "model.layers.4.block_sparse_moe.experts.7.w2"));
    CHECK_FALSE(module_pattern_matches("*.experts.?.w2", "model.layers.4.block_sparse_moe.experts.17.w2"));
    CHECK(module_pattern_matches("*mlp.gate", "model.layers.4.mlp.gate"));
    CHECK_FALSE(module_pattern_matches("*mlp.gate", "model.layers.4.mlp.gate_proj"));
  }

  TEST_CASE("the manifest text reads back as the same shapes, its header naming the model, tp and ep") {
    const Model m(kDeepSeekV3, modelopt(R"(["lm_head", "model.layers.*.self_attn*"])"));
    const ModelShapes derived = derive_model_shapes(m.str(), 8, 8);
    const std::string text = model_manifest_text(derived);
    CHECK(text.find("model_type deepseek_v3, 61 layers") != std::string::npos);
    CHECK(text.find("--tp 8 --ep 8") != std::string::npos);
    const std::vector<WeightShape> back = parse_manifest(text, "derived");
    REQUIRE(back.size() == derived.shapes.size());
    for (size_t i = 0; i < back.size(); ++i) {
      CAPTURE(back[i].name);
      CHECK(back[i].name == derived.shapes[i].name);
      CHECK(std::tie(back[i].n, back[i].k, back[i].groups) ==
            std::tie(derived.shapes[i].n, derived.shapes[i].k, derived.shapes[i].groups));
      CHECK(back[i].variants.a_from == derived.shapes[i].variants.a_from);
    }
  }
}
