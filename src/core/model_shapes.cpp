#include "core/model_shapes.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/fs_util.hpp"

namespace nvfp4::jit::detail {

namespace {

using nlohmann::json;

// A config.json is a few KB; the bound keeps a wrong path (a weights file) from being read whole.
constexpr size_t kMaxConfigBytes = size_t(16) << 20;
// Config numbers are sizes and counts: bounded so every product below stays far from overflow.
constexpr int64_t kMaxConfigNumber = INT32_MAX;

[[noreturn]] void bad(const std::string& message) { throw Error(Status::invalid_argument, message); }

// The file parsed, or nullopt when it does not exist. Regular files only (a FIFO, a device or a
// directory is refused, not read), read once.
std::optional<json> read_json(const std::string& path) {
  std::string why;
  const auto bytes = read_file_following(path, kMaxConfigBytes, &why);
  if (!bytes) {
    if (why.empty()) return std::nullopt;
    bad(why);
  }
  try {
    return json::parse(bytes->begin(), bytes->end());
  } catch (const json::parse_error& e) {
    std::string what = e.what();  // "[json.exception.parse_error.101] parse error at line 3, column 5: ..."
    if (const size_t end = what.find("] "); what.rfind("[json.exception", 0) == 0 && end != std::string::npos)
      what.erase(0, end + 2);
    bad(fmt::format("{}: not valid JSON: {}", path, what));
  }
}

// One JSON object of a config file; every error names the file and the field.
class Fields {
 public:
  Fields(const json& object, std::string origin, std::string prefix = {})
      : j_(object), origin_(std::move(origin)), prefix_(std::move(prefix)) {}

  const std::string& origin() const { return origin_; }
  std::string where(std::string_view key) const { return fmt::format("{}: {}{}", origin_, prefix_, key); }
  bool has(std::string_view key) const {
    const auto it = j_.find(key);
    return it != j_.end() && !it->is_null();
  }
  const json& at(std::string_view key) const {
    if (!has(key)) bad(fmt::format("{}: missing field `{}{}`", origin_, prefix_, key));
    return *j_.find(key);
  }
  // An integer of at least `min`.
  int64_t integer(std::string_view key, int64_t min = 1) const { return checked(key, at(key), min); }
  int64_t integer_or(std::string_view key, int64_t fallback, int64_t min = 0) const {
    return has(key) ? integer(key, min) : fallback;
  }
  std::string string(std::string_view key) const {
    const json& v = at(key);
    if (!v.is_string()) bad(fmt::format("{} is {}, not a string", where(key), v.dump()));
    return v.get<std::string>();
  }
  std::vector<int64_t> integers_or_empty(std::string_view key) const {
    std::vector<int64_t> out;
    if (!has(key)) return out;
    const json& v = at(key);
    if (!v.is_array()) bad(fmt::format("{} is {}, not a list of integers", where(key), v.dump()));
    for (const json& x : v) out.push_back(checked(key, x, 0));
    return out;
  }
  std::vector<std::string> strings_or_empty(std::string_view key) const {
    std::vector<std::string> out;
    if (!has(key)) return out;
    const json& v = at(key);
    if (!v.is_array()) bad(fmt::format("{} is not a list of strings", where(key)));
    for (const json& x : v) {
      if (!x.is_string()) bad(fmt::format("{} holds {}, not a string", where(key), x.dump()));
      out.push_back(x.get<std::string>());
    }
    return out;
  }
  Fields object(std::string_view key) const {
    const json& v = at(key);
    if (!v.is_object()) bad(fmt::format("{} is {}, not an object", where(key), v.dump()));
    return Fields(v, origin_, fmt::format("{}{}.", prefix_, key));
  }

 private:
  int64_t checked(std::string_view key, const json& v, int64_t min) const {
    if (!v.is_number_integer() || v.get<int64_t>() < min || v.get<int64_t>() > kMaxConfigNumber)
      bad(fmt::format("{} is {}, not an integer {} to {}", where(key), v.dump(), min, kMaxConfigNumber));
    return v.get<int64_t>();
  }

  const json& j_;
  std::string origin_, prefix_;
};

// What ModelOpt's quant config says: NVFP4, and which modules it left out.
struct QuantConfig {
  std::string origin;  // "hf_quant_config.json" or "config.json's quantization_config"
  std::vector<std::string> exclude;

  // The pattern that excludes `module`, or null.
  const std::string* excluding(std::string_view module) const {
    for (const std::string& p : exclude)
      if (module_pattern_matches(p, module)) return &p;
    return nullptr;
  }
};

void check_nvfp4(const Fields& q) {
  const std::string algo = q.string("quant_algo");
  if (algo != "NVFP4") bad(fmt::format("{} is `{}`, not NVFP4 (nvfp4-jit runs NVFP4 weights)", q.where("quant_algo"), algo));
  if (q.has("group_size") && q.integer("group_size") != 16)
    bad(fmt::format("{} is {}, not 16 (NVFP4's block)", q.where("group_size"), q.integer("group_size")));
}

QuantConfig read_quant_config(const std::string& dir, const Fields& config) {
  QuantConfig qc;
  const std::string path = dir + "/hf_quant_config.json";
  if (const std::optional<json> hf = read_json(path)) {
    if (!hf->is_object()) bad(fmt::format("{}: not a JSON object", path));
    const Fields q = Fields(*hf, path).object("quantization");
    check_nvfp4(q);
    qc.origin = "hf_quant_config.json";
    qc.exclude = q.strings_or_empty("exclude_modules");
    return qc;
  }
  if (!config.has("quantization_config"))
    bad(fmt::format("{}: no quantization config: neither hf_quant_config.json nor config.json's quantization_config "
                    "(a ModelOpt NVFP4 checkpoint has one)",
                    dir));
  const Fields q = config.object("quantization_config");
  const std::string method = q.string("quant_method");
  if (method != "modelopt") bad(fmt::format("{} is `{}`, not modelopt", q.where("quant_method"), method));
  check_nvfp4(q);
  qc.origin = "config.json's quantization_config";
  qc.exclude = q.strings_or_empty(q.has("exclude_modules") ? "exclude_modules" : "ignore");
  return qc;
}

// The engine's GEMMs, one per (module, shape), with the layers that run it.
struct Role {
  std::string module;  // below model.layers.<i>.
  int64_t n, k;
  int32_t groups;
  std::vector<AFrom> a_from;
  std::set<int64_t> layers;
};

constexpr AFrom kQuantize = AFrom::quantize, kRmsNorm = AFrom::rmsnorm, kSwiglu = AFrom::swiglu, kMoeStage = AFrom::moe_stage;

// Reads one model's config and collects the GEMMs of one rank.
class Derivation {
 public:
  Derivation(const Fields& config, const QuantConfig& quant, int tp, int ep) : c_(config), q_(quant), tp_(tp), ep_(ep) {}

  const Fields& config() const { return c_; }
  int tp() const { return tp_; }
  int ep() const { return ep_; }
  const std::vector<Role>& roles() const { return roles_; }

  // `value` (the field `field`) divided by tp or ep, which must divide it.
  int64_t divide(std::string_view field, int64_t value, std::string_view by_name, int by) const {
    if (value % by) bad(fmt::format("{}: {} {} is not divisible by {} {}", c_.origin(), field, value, by_name, by));
    return value / by;
  }
  int64_t by_tp(std::string_view field, int64_t value) const { return divide(field, value, "tp", tp_); }

  // Whether the engine's fusion of the checkpoint modules `parts` runs in NVFP4: all of them
  // are quantized, or none is; a mix cannot be one GEMM.
  bool quantized(int64_t layer, const std::vector<std::string>& parts, std::string_view fused) const {
    const std::string* first = q_.excluding(parts.front());
    for (size_t i = 1; i < parts.size(); ++i) {
      const std::string* p = q_.excluding(parts[i]);
      if ((p == nullptr) != (first == nullptr)) {
        const std::string& ex = first ? parts.front() : parts[i];
        const std::string& in = first ? parts[i] : parts.front();
        bad(fmt::format("{}: {} is excluded (`{}`) but {} is not; an engine runs them as one GEMM, "
                        "model.layers.{}.{}",
                        q_.origin, ex, first ? *first : *p, in, layer, fused));
      }
    }
    return first == nullptr;
  }

  // Adds the GEMM `module` of `layer` when its checkpoint modules `parts` are quantized.
  // `k_from` says where K came from, for the error when it is no multiple of 16.
  void add(int64_t layer, std::string module, const std::vector<std::string>& parts, int64_t n, int64_t k,
           std::string_view k_from, int64_t groups, std::vector<AFrom> a_from) {
    if (!quantized(layer, parts, module)) return;
    if (k % 16)
      bad(fmt::format("{}: model.layers.{}.{} would have K = {} ({}), not a multiple of 16 (NVFP4's block)", c_.origin(),
                      layer, module, k, k_from));
    for (Role& r : roles_)
      if (r.module == module && r.n == n && r.k == k && r.groups == groups) {
        r.layers.insert(layer);
        return;
      }
    roles_.push_back({std::move(module), n, k, int32_t(groups), std::move(a_from), {layer}});
  }

  std::string layer_module(int64_t layer, std::string_view name) const { return fmt::format("model.layers.{}.{}", layer, name); }

  // q, k and v fused into one column-parallel qkv_proj; o_proj row-parallel.
  void attention(int64_t layer, int64_t hidden, int64_t heads, int64_t kv_heads, int64_t head_dim) {
    const int64_t local_heads = by_tp("num_attention_heads", heads);
    int64_t local_kv = 1;  // KV heads fewer than tp: each rank holds one, replicated
    if (kv_heads >= tp_) local_kv = by_tp("num_key_value_heads", kv_heads);
    else if (tp_ % kv_heads)
      bad(fmt::format("{}: num_key_value_heads {} is fewer than tp {} but does not divide it (each rank holds one)",
                      c_.origin(), kv_heads, tp_));
    const auto part = [&](std::string_view p) { return layer_module(layer, fmt::format("self_attn.{}", p)); };
    add(layer, "self_attn.qkv_proj", {part("q_proj"), part("k_proj"), part("v_proj")}, (local_heads + 2 * local_kv) * head_dim,
        hidden, "hidden_size", 1, {kRmsNorm, kQuantize});
    add(layer, "self_attn.o_proj", {part("o_proj")}, hidden, local_heads * head_dim,
        fmt::format("num_attention_heads x head_dim / tp = {} x {} / {}", heads, head_dim, tp_), 1, {kQuantize});
  }

  // A gated MLP under `prefix` (gate and up fused, column-parallel; down row-parallel).
  void mlp(int64_t layer, std::string_view prefix, std::string_view field, int64_t hidden, int64_t intermediate) {
    const int64_t local = by_tp(field, intermediate);
    const auto part = [&](std::string_view p) { return layer_module(layer, fmt::format("{}.{}", prefix, p)); };
    add(layer, fmt::format("{}.gate_up_proj", prefix), {part("gate_proj"), part("up_proj")}, 2 * local, hidden,
        "hidden_size", 1, {kRmsNorm, kQuantize});
    add(layer, fmt::format("{}.down_proj", prefix), {part("down_proj")}, hidden, local,
        fmt::format("{} {} / tp {}", field, intermediate, tp_), 1, {kSwiglu, kQuantize});
  }

  // The checkpoint's names of an expert's projections, per expert (`experts.<e>.gate_proj`) or
  // one module holding every expert (gpt-oss: `experts.gate_up_proj`, gate and up already
  // fused); `gate_up` names the engine's fusion of gate and up (the checkpoint's, without `gate`).
  struct ExpertNames {
    std::string gate, up, down, gate_up;
    bool per_expert = true;
  };

  // Routed experts, a grouped GEMM each for gate_up and down.
  void experts(int64_t layer, std::string_view prefix, std::string_view experts_field, int64_t experts,
               std::string_view inter_field, int64_t intermediate, int64_t hidden, const ExpertNames& names) {
    int64_t groups = experts, local = intermediate;
    std::string k_from = fmt::format("{} {}", inter_field, intermediate);
    if (ep_ > 1) {
      groups = divide(experts_field, experts, "ep", ep_);
    } else {
      local = by_tp(inter_field, intermediate);
      k_from += fmt::format(" / tp {}", tp_);
    }
    std::vector<std::string> gate_up, down;
    const auto module = [&](std::string_view name) { return layer_module(layer, fmt::format("{}.{}", prefix, name)); };
    if (names.per_expert) {
      for (int64_t e = 0; e < experts; ++e) {
        gate_up.push_back(module(fmt::format("{}.{}", e, names.gate)));
        gate_up.push_back(module(fmt::format("{}.{}", e, names.up)));
        down.push_back(module(fmt::format("{}.{}", e, names.down)));
      }
    } else {
      gate_up.push_back(module(names.gate_up));
      down.push_back(module(names.down));
    }
    add(layer, fmt::format("{}.{}", prefix, names.gate_up), gate_up, 2 * local, hidden, "hidden_size", groups,
        {kMoeStage, kRmsNorm, kQuantize});
    add(layer, fmt::format("{}.{}", prefix, names.down), down, hidden, local, k_from, groups, {kSwiglu, kQuantize});
  }

 private:
  const Fields& c_;
  const QuantConfig& q_;
  int tp_, ep_;
  std::vector<Role> roles_;
};

void no_experts(const Derivation& d, std::string_view type) {
  if (d.ep() > 1) bad(fmt::format("{}: ep {} shards experts, and model_type `{}` has none", d.config().origin(), d.ep(), type));
}

int64_t head_dim_of(const Fields& c, int64_t hidden, int64_t heads) {
  if (c.has("head_dim")) return c.integer("head_dim");
  if (hidden % heads)
    bad(fmt::format("{}: no head_dim, and hidden_size {} is not divisible by num_attention_heads {}", c.origin(), hidden, heads));
  return hidden / heads;
}

const Derivation::ExpertNames kGateUpDown{"gate_proj", "up_proj", "down_proj", "gate_up_proj", true};

// Llama 3.x, Mistral, Qwen2, Qwen3 (dense) and Qwen3-MoE: GQA attention, then a gated MLP or
// (Qwen3-MoE's sparse layers) routed experts.
void gqa_model(Derivation& d, std::string_view type, int64_t layers) {
  const Fields& c = d.config();
  const int64_t hidden = c.integer("hidden_size"), heads = c.integer("num_attention_heads");
  const int64_t kv = c.integer_or("num_key_value_heads", heads, 1);
  const int64_t head_dim = head_dim_of(c, hidden, heads);
  const bool moe = type == "qwen3_moe";
  const int64_t experts = moe ? c.integer("num_experts", 0) : 0;
  const int64_t step = moe ? c.integer_or("decoder_sparse_step", 1, 1) : 1;
  const std::vector<int64_t> mlp_only = moe ? c.integers_or_empty("mlp_only_layers") : std::vector<int64_t>{};
  if (experts == 0) no_experts(d, type);
  for (int64_t i = 0; i < layers; ++i) {
    d.attention(i, hidden, heads, kv, head_dim);
    const bool sparse = experts > 0 && (i + 1) % step == 0 &&
                        std::find(mlp_only.begin(), mlp_only.end(), i) == mlp_only.end();
    if (sparse)
      d.experts(i, "mlp.experts", "num_experts", experts, "moe_intermediate_size", c.integer("moe_intermediate_size"), hidden,
                kGateUpDown);
    else
      d.mlp(i, "mlp", "intermediate_size", hidden, c.integer("intermediate_size"));
  }
}

// DeepSeek-V2/V3/R1 and Kimi-K2: MLA attention; the first first_k_dense_replace layers (then every
// layer off moe_layer_freq) dense, the others routed experts plus shared experts.
void deepseek_model(Derivation& d, int64_t layers) {
  const Fields& c = d.config();
  const int64_t hidden = c.integer("hidden_size"), heads = c.integer("num_attention_heads");
  const int64_t kv_lora = c.integer("kv_lora_rank"), rope = c.integer("qk_rope_head_dim");
  const int64_t nope = c.integer("qk_nope_head_dim"), v_dim = c.integer("v_head_dim");
  const int64_t q_lora = c.has("q_lora_rank") ? c.integer("q_lora_rank") : 0;  // null: a plain q_proj
  const int64_t routed = c.has("n_routed_experts") ? c.integer("n_routed_experts", 0) : 0;
  const int64_t first_dense = c.integer_or("first_k_dense_replace", 0), freq = c.integer_or("moe_layer_freq", 1, 1);
  const int64_t shared = c.integer_or("n_shared_experts", 0);
  if (routed == 0) no_experts(d, c.string("model_type"));
  const int64_t local_heads = d.by_tp("num_attention_heads", heads);
  for (int64_t i = 0; i < layers; ++i) {
    const auto part = [&](std::string_view p) { return d.layer_module(i, fmt::format("self_attn.{}", p)); };
    if (q_lora > 0) {  // replicated, and fused by the engines: one GEMM from the hidden state
      d.add(i, "self_attn.fused_qkv_a_proj", {part("q_a_proj"), part("kv_a_proj_with_mqa")}, q_lora + kv_lora + rope,
            hidden, "hidden_size", 1, {kRmsNorm, kQuantize});
      d.add(i, "self_attn.q_b_proj", {part("q_b_proj")}, local_heads * (nope + rope), q_lora, "q_lora_rank", 1,
            {kRmsNorm, kQuantize});
    } else {
      d.add(i, "self_attn.q_proj", {part("q_proj")}, local_heads * (nope + rope), hidden, "hidden_size", 1,
            {kRmsNorm, kQuantize});
      d.add(i, "self_attn.kv_a_proj_with_mqa", {part("kv_a_proj_with_mqa")}, kv_lora + rope, hidden, "hidden_size", 1,
            {kRmsNorm, kQuantize});
    }
    d.add(i, "self_attn.kv_b_proj", {part("kv_b_proj")}, local_heads * (nope + v_dim), kv_lora, "kv_lora_rank", 1,
          {kRmsNorm, kQuantize});
    d.add(i, "self_attn.o_proj", {part("o_proj")}, hidden, local_heads * v_dim,
          fmt::format("num_attention_heads x v_head_dim / tp = {} x {} / {}", heads, v_dim, d.tp()), 1, {kQuantize});
    if (routed > 0 && i >= first_dense && i % freq == 0) {
      const int64_t inter = c.integer("moe_intermediate_size");
      d.experts(i, "mlp.experts", "n_routed_experts", routed, "moe_intermediate_size", inter, hidden, kGateUpDown);
      if (shared > 0) d.mlp(i, "mlp.shared_experts", "moe_intermediate_size x n_shared_experts", hidden, inter * shared);
    } else {
      d.mlp(i, "mlp", "intermediate_size", hidden, c.integer("intermediate_size"));
    }
  }
}

// gpt-oss and Mixtral: GQA attention, every layer routed experts.
void all_experts_model(Derivation& d, std::string_view type, int64_t layers) {
  const Fields& c = d.config();
  const int64_t hidden = c.integer("hidden_size"), heads = c.integer("num_attention_heads");
  const int64_t kv = c.integer_or("num_key_value_heads", heads, 1);
  const bool gpt_oss = type == "gpt_oss";
  const int64_t head_dim = gpt_oss ? c.integer("head_dim") : head_dim_of(c, hidden, heads);
  const int64_t experts = c.integer("num_local_experts"), inter = c.integer("intermediate_size");
  const Derivation::ExpertNames names = gpt_oss ? Derivation::ExpertNames{"", "", "down_proj", "gate_up_proj", false}
                                                : Derivation::ExpertNames{"w1", "w3", "w2", "w13", true};
  for (int64_t i = 0; i < layers; ++i) {
    d.attention(i, hidden, heads, kv, head_dim);
    d.experts(i, gpt_oss ? "mlp.experts" : "block_sparse_moe.experts", "num_local_experts", experts, "intermediate_size",
              inter, hidden, names);
  }
}

const std::vector<std::string> kModelTypes = {"llama",       "mistral",     "qwen2",   "qwen3",  "qwen3_moe",
                                              "deepseek_v2", "deepseek_v3", "kimi_k2", "gpt_oss", "mixtral"};

// "0-2,5": a set of layers; "*" when it is every one.
std::string layer_set(const std::set<int64_t>& layers, int64_t count) {
  if (int64_t(layers.size()) == count) return "*";
  std::string out;
  for (auto it = layers.begin(); it != layers.end();) {
    const int64_t first = *it;
    int64_t last = first;
    while (++it != layers.end() && *it == last + 1) ++last;
    out += fmt::format("{}{}", out.empty() ? "" : ",", first == last ? fmt::format("{}", first) : fmt::format("{}-{}", first, last));
  }
  return out;
}

}  // namespace

bool module_pattern_matches(std::string_view p, std::string_view s) {
  size_t pi = 0, si = 0, star = std::string_view::npos, star_si = 0;
  while (true) {
    if (pi == p.size() && (si == s.size() || s[si] == '.')) return true;  // the module, or one holding it
    if (pi < p.size() && p[pi] == '*') {
      star = pi++;
      star_si = si;
    } else if (pi < p.size() && si < s.size() && (p[pi] == '?' || p[pi] == s[si])) {
      ++pi, ++si;
    } else if (star != std::string_view::npos && star_si < s.size()) {
      pi = star + 1;
      si = ++star_si;
    } else {
      return false;
    }
  }
}

ModelShapes derive_model_shapes(const std::string& model_dir, int tp, int ep, const PrewarmVariants& base) {
  if (tp < 1) bad(fmt::format("tp = {}: a tensor-parallel size is at least 1", tp));
  if (ep < 1) bad(fmt::format("ep = {}: an expert-parallel size is at least 1", ep));
  // each module's quantizers come from the model (an RMSNorm before qkv, SwiGLU before down)
  if (base.a_from != PrewarmVariants{}.a_from)
    bad("a-from: with a model, each module's activation quantizers are derived from it; give a-from in a manifest "
        "(prewarm --model ... --shapes writes one to edit)");
  const std::string dir = model_dir.size() > 1 && model_dir.back() == '/' ? model_dir.substr(0, model_dir.size() - 1) : model_dir;
  if (struct stat st{}; ::stat(dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
    bad(fmt::format("{} is {}, not a model directory (one holding config.json)", dir, file_kind(st.st_mode)));
  const std::string path = dir + "/config.json";
  const std::optional<json> config_json = read_json(path);
  if (!config_json) bad(fmt::format("{}: no such file (a model directory holds config.json)", path));
  if (!config_json->is_object()) bad(fmt::format("{}: not a JSON object", path));
  const Fields config(*config_json, path);
  const std::string type = config.string("model_type");
  if (std::find(kModelTypes.begin(), kModelTypes.end(), type) == kModelTypes.end()) {
    std::string known;
    for (const std::string& t : kModelTypes) known += fmt::format("{}{}", known.empty() ? "" : ", ", t);
    bad(fmt::format("{}: model_type `{}` is not one nvfp4-jit knows ({})", path, type, known));
  }
  const QuantConfig quant = read_quant_config(dir, config);
  const int64_t layers = config.integer("num_hidden_layers");

  Derivation d(config, quant, tp, ep);
  if (type == "deepseek_v2" || type == "deepseek_v3" || type == "kimi_k2") deepseek_model(d, layers);
  else if (type == "gpt_oss" || type == "mixtral") all_experts_model(d, type, layers);
  else gqa_model(d, type, layers);

  ModelShapes out;
  out.header = fmt::format(
      "# {}: model_type {}, {} layers, NVFP4 ({}, exclusion patterns: {})\n"
      "# One rank of --tp {} --ep {}: nvfp4-jit prewarm --model {} --tp {} --ep {}\n"
      "# Engines' fused GEMMs; routers, lm_head and embeddings left out. groups > 1: grouped (MoE) weights.\n"
      "# name  N  K  groups  variants\n",
      dir, type, layers, quant.origin, quant.exclude.size(), tp, ep, dir, tp, ep);
  for (const Role& r : d.roles()) {  // one shape per (N, K, groups): the modules that share it, and their quantizers
    const std::string name = fmt::format("model.layers.{}.{}", layer_set(r.layers, layers), r.module);
    const auto same = std::find_if(out.shapes.begin(), out.shapes.end(),
                                   [&](const WeightShape& s) { return s.n == r.n && s.k == r.k && s.groups == r.groups; });
    if (same == out.shapes.end()) {
      PrewarmVariants v = base;
      v.a_from = r.a_from;
      out.shapes.push_back({name, r.n, r.k, r.groups, std::move(v), {}});
      continue;
    }
    same->name += "+" + name;
    for (AFrom op : r.a_from)
      if (!same->variants.writes_a(op)) same->variants.a_from.push_back(op);
  }
  if (out.shapes.empty())
    bad(fmt::format("{}: every linear layer of {} is excluded from NVFP4 by {}: nothing to prewarm", dir, type, quant.origin));
  return out;
}

std::string model_manifest_text(const ModelShapes& model) {
  std::string text = model.header;
  for (const WeightShape& s : model.shapes)
    text += fmt::format("{} {} {} {} a-from={}\n", s.name, s.n, s.k, s.groups, a_from_names(s.variants.a_from));
  return text;
}

}  // namespace nvfp4::jit::detail
