// nvfp4-jit bench block: a decoder's MLP and MoE blocks timed whole, as an engine runs them:
// the public ops chained into one block on prepacked weights, eight blocks with eight routings
// captured into one CUDA graph, the graph's GPU time over eight, beside the block's byte floor.
#include "cli/benches.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <set>

#include <fmt/format.h>

#include "cli/bench_util.hpp"
#include "cli/cli.hpp"
#include "common/nvfp4_format.cuh"
#include "core/gpu_util.hpp"
#include "nvfp4/jit.hpp"
#include "ops/gemm/routing_draw.hpp"

namespace nvfp4::jit::cli {

using namespace detail;

namespace {

constexpr int kBlocksPerGraph = 8;  // each with its own routing

// A decoder block: a dense MLP (experts = 0: RMSNorm, gate_up, SwiGLU, down) or an MoE block
// (staging, routing, grouped gate_up, SwiGLU, grouped down, the router-weighted combine).
struct BlockModel {
  const char* name;
  int64_t hidden, inter;
  int experts = 0, topk = 0;
  // One shared expert, run as routed expert `experts` that every token picks with weight 1 (the
  // engines' shared-expert fusion): one more group and one more choice per token.
  bool shared_expert = false;
  int groups() const { return experts + (shared_expert ? 1 : 0); }
  int choices() const { return topk + (shared_expert ? 1 : 0); }
  bool moe() const { return experts > 0; }
};

const BlockModel kBlocks[] = {
    {"llama-3.1-8b-mlp", 4096, 14336},
    {"deepseek-v3-moe", 7168, 2048, 256, 8, true},
    {"qwen3-30b-a3b-moe", 2048, 768, 128, 8},
    {"gpt-oss-120b-moe", 2880, 2880, 128, 4},
};

// w4a8: W4A16's BF16 rows with both GEMMs in the W4A8 precision (GemmPrecision::w4a8; opt-in,
// FP8 tensor cores, run at prefill sizes only: below them it runs the exact mode); w4a4_w4a8:
// W4A4's NVFP4 rows so (the fused gate_up writing NVFP4 for down, as W4A4's does).
enum class Activations { w4a16, w4a4, w4a8, w4a4_w4a8 };
bool nvfp4_in(Activations acts) { return acts == Activations::w4a4 || acts == Activations::w4a4_w4a8; }
bool runs_w4a8(Activations acts) { return acts == Activations::w4a8 || acts == Activations::w4a4_w4a8; }
constexpr int64_t kW4A8Tokens = 1024;  // the least tokens a W4A8 row is run at

// The router's choices [tokens, choices]: topk distinct experts per token (drawn as the tuner and
// `bench grouped` draw them), then the shared expert if any.
std::vector<int32_t> draw_choices(const BlockModel& b, RoutingDraw routing, int64_t tokens, std::mt19937& rng) {
  const std::vector<int32_t> routed = draw_topk_ids(routing, tokens, b.experts, b.topk, rng);
  if (!b.shared_expert) return routed;
  std::vector<int32_t> ids;
  ids.reserve(size_t(tokens * b.choices()));
  for (int64_t t = 0; t < tokens; ++t) {
    ids.insert(ids.end(), routed.begin() + t * b.topk, routed.begin() + (t + 1) * b.topk);
    ids.push_back(b.experts);
  }
  return ids;
}

// Router weights: each token's routed weights sum to 1, the shared expert's is 1.
std::vector<float> draw_weights(const BlockModel& b, int64_t tokens, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(0.1f, 1.0f);
  const int c = b.choices();
  std::vector<float> w(size_t(tokens * c));
  for (int64_t t = 0; t < tokens; ++t) {
    float sum = 0;
    for (int j = 0; j < b.topk; ++j) sum += w[size_t(t * c + j)] = u(rng);
    for (int j = 0; j < b.topk; ++j) w[size_t(t * c + j)] /= sum;
    if (b.shared_expert) w[size_t(t * c + b.topk)] = 1.0f;
  }
  return w;
}

std::vector<uint16_t> normal_bf16(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = nvfp4k::float_to_bf16_bits(normal(rng));
  return v;
}

// `groups` NVFP4 weights [n, k], prepacked one after the other, from a few random weights (the
// time does not depend on the values), and each group's global scale on the device. A gate_up
// weight is prepacked in the SwiGLU epilogue's row order (swiglu_interleave 0), which the
// chain's plain GEMM reads in the same time.
struct PrepackedWeights {
  int64_t n, k, groups;
  DeviceBuffer data, global_scales;
  PrepackedWeights(int64_t n_, int64_t k_, int64_t groups_, std::mt19937& rng, bool gate_up = false)
      : n(n_), k(k_), groups(groups_), data(size_t(groups_ * prepacked_bytes(n_, k_))),
        global_scales(to_device(std::vector<float>(size_t(groups_), 1e-3f))) {
    constexpr int kSources = 2;
    std::vector<DeviceBuffer> packed, scales;
    for (int i = 0; i < kSources; ++i) {
      packed.push_back(to_device(random_bytes(size_t(n * k / 2), rng)));
      scales.push_back(to_device(random_scales(size_t(n * k / 16), rng)));
    }
    for (int64_t g = 0; g < groups; ++g) {
      PrepackArgs pre;
      pre.weight.data = packed[size_t(g % kSources)].get(), pre.weight.scales = scales[size_t(g % kSources)].get();
      pre.n = n, pre.k = k, pre.swiglu_interleave = gate_up ? 0 : -1;
      pre.out = static_cast<char*>(data.get()) + g * bytes_per_group();
      prepack(pre, nullptr);
    }
  }
  int64_t bytes_per_group() const { return prepacked_bytes(n, k); }
  Nvfp4Tensor tensor() const {
    Nvfp4Tensor t;
    t.data = data.get();
    t.global_scale = groups > 1 ? GlobalScale{1.0f, global_scales.as<float>(), true} : GlobalScale{1e-3f, nullptr, false};
    return t;
  }
};

// An NVFP4 activation [rows, k]: values, linear scales, a global scale per row.
struct Nvfp4Rows {
  DeviceBuffer data, scales, global_scales;
  Nvfp4Rows(int64_t rows, int64_t k)
      : data(size_t(rows * k / 2)), scales(size_t(scale_bytes(ScaleLayout::linear, rows, k))), global_scales(size_t(rows * 4)) {}
  // As a quantizer's output, with the given static scale, or (0) a scale computed per row.
  QuantizedOutput output(float static_scale) const {
    QuantizedOutput o;
    o.data = data.get(), o.scales = scales.get();
    if (static_scale > 0) {
      o.global_scale.value = static_scale;
    } else {
      o.scale_mode = GlobalScaleMode::compute_per_row;
      o.global_scale_out = global_scales.as<float>();
    }
    return o;
  }
  // As a GEMM's A, with the scale output() wrote.
  Nvfp4Tensor input(float static_scale) const {
    Nvfp4Tensor t;
    t.data = data.get(), t.scales = scales.get();
    t.global_scale = static_scale > 0 ? GlobalScale{static_scale, nullptr, false} : GlobalScale{1.0f, global_scales.as<float>(), true};
    return t;
  }
};

constexpr float kInputScale = 5.0f / 2688.0f;  // a calibrated static activation scale: tokens ~ N(0, 1)

// How much of a block runs fused. `fused`: gate_up with the SwiGLU epilogue instead of gate_up +
// swiglu_quantize, its BF16 rows into down (W4A16), or its rows as NVFP4 (W4A4) with a calibrated
// static scale (ModelOpt's down_proj input_scale; a scale computed per row would need a second
// pass). `fold`: `fused` and one fold more, an MoE block's down
// with the combine in its epilogue (no moe_combine) or the dense W4A16 MLP's gate_up normalizing
// its input itself (a_rmsnorm_weight: no rmsnorm_quantize).
enum class Fusion { chain, fused, fold };

// One block's buffers at one token count, and its ops as `fusion` says.
class Block {
 public:
  Block(const BlockModel& model, const PrepackedWeights& gate_up, const PrepackedWeights& down, int64_t tokens,
        Activations acts, RoutingDraw routing, std::mt19937& rng, Fusion fusion)
      : m_(model), gate_up_(gate_up), down_(down), tokens_(tokens), acts_(acts), fused_(fusion != Fusion::chain),
        fused_combine_(fusion == Fusion::fold && model.moe()),
        norm_in_gate_up_(fusion == Fusion::fold && !model.moe() && acts == Activations::w4a16),
        bf16_in_(!nvfp4_in(acts)), rows_(model.moe() ? tokens * model.choices() : tokens),
        x_(to_device(normal_bf16(size_t(tokens * model.hidden), rng))), xq_(tokens, model.hidden),
        h_(size_t(rows_ * 2 * model.inter * 2)), hq_(rows_, model.inter), y_(size_t(rows_ * model.hidden * 2)),
        out_(size_t(tokens * model.hidden * 2)) {
    if (m_.moe()) {
      for (int r = 0; r < kBlocksPerGraph; ++r) {
        choices_.push_back(draw_choices(m_, routing, tokens, rng));
        ids_.push_back(to_device(choices_.back()));
        weights_.push_back(to_device(draw_weights(m_, tokens, rng)));
      }
      const size_t entries = size_t(rows_);
      staged_ids_ = DeviceBuffer(entries * 4), staged_weights_ = DeviceBuffer(entries * 4);
      group_ends_ = DeviceBuffer(size_t(m_.groups()) * 4), row_index_ = DeviceBuffer(entries * 4), positions_ = DeviceBuffer(entries * 4);
      route_workspace_ = DeviceBuffer(size_t(std::max<int64_t>(moe_route_workspace_bytes(route(0)), 16)));
      workspace_ = DeviceBuffer(size_t(std::max({grouped_gemm_workspace_bytes(grouped_gate_up()), grouped_gemm_workspace_bytes(grouped_down()), int64_t(16)})));
      counters_ = DeviceBuffer(size_t(std::max<int64_t>(moe_combine_counter_bytes(combined_down(0)), 16)));
      counters_.fill(0);  // once: each fused down leaves them zero
    } else {
      norm_weight_ = to_device(normal_bf16(size_t(m_.hidden), rng));
      normed_ = DeviceBuffer(size_t(tokens * m_.hidden * 2));
      workspace_ = DeviceBuffer(size_t(std::max({gemm_workspace_bytes(dense_gate_up()), gemm_workspace_bytes(dense_down()), int64_t(16)})));
    }
    // SwiGLU reads every row the GEMM may leave unwritten (past the routed ones): keep them finite.
    h_.fill(0);
  }

  // The block with routing `r` (of kBlocksPerGraph), enqueued on `stream`.
  void run(int r, CUstream stream) const {
    if (!m_.moe()) {
      if (!norm_in_gate_up_) {
        RmsNormQuantizeArgs norm;
        norm.in = x_.get(), norm.rows = tokens_, norm.k = m_.hidden, norm.weight = norm_weight_.get();
        norm.out = xq_.output(kInputScale);
        if (bf16_in_) norm.normed = normed_.get();
        rmsnorm_quantize(norm, stream);
      }
      gemm(dense_gate_up(), stream);
      if (!fused_) swiglu_quantize(swiglu(), stream);
      gemm(dense_down(), stream);
      return;
    }
    if (!bf16_in_) {
      MoeStageArgs st;
      st.tokens = x_.get(), st.rows = tokens_, st.k = m_.hidden;
      st.out = xq_.output(kInputScale);
      st.topk = m_.choices(), st.topk_ids = ids_[size_t(r)].get(), st.topk_weights = weights_[size_t(r)].as<float>();
      st.topk_ids_out = staged_ids_.get(), st.topk_weights_out = staged_weights_.as<float>();
      moe_stage(st, stream);
    }
    moe_route(route(r), stream);
    grouped_gemm(grouped_gate_up(), stream);
    if (!fused_) swiglu_quantize(swiglu(), stream);
    if (fused_combine_) return grouped_gemm(combined_down(r), stream);  // the combine in down's epilogue
    grouped_gemm(grouped_down(), stream);
    MoeCombineArgs cb;
    cb.d = y_.get(), cb.d_rows = rows_, cb.positions = positions_.as<int32_t>();
    cb.weights = router_weights(r);
    cb.tokens = tokens_, cb.topk = m_.choices(), cb.n = m_.hidden, cb.out = out_.get();
    moe_combine(cb, stream);
  }

  // Distinct experts (groups) the routing `r` touches.
  int64_t groups_touched(int r) const {
    if (!m_.moe()) return 1;
    return int64_t(std::set<int32_t>(choices_[size_t(r)].begin(), choices_[size_t(r)].end()).size());
  }

 private:
  MoeRouteArgs route(int r) const {
    MoeRouteArgs rt;
    rt.topk_ids = !bf16_in_ ? staged_ids_.get() : (ids_.empty() ? nullptr : ids_[size_t(r)].get());
    rt.tokens = tokens_, rt.topk = m_.choices(), rt.groups = m_.groups();
    rt.group_ends = group_ends_.as<int32_t>(), rt.row_index = row_index_.as<int32_t>(), rt.positions = positions_.as<int32_t>();
    rt.workspace = route_workspace_.get(), rt.workspace_bytes = int64_t(route_workspace_.bytes());
    return rt;
  }
  // gate_up and down as the dense or grouped GEMM runs them; gate_up's A is the block's input
  // (W4A16: BF16, normalized for the MLP; W4A4: its NVFP4 staging), down's the SwiGLU's NVFP4.
  GemmArgs gemm_args(const PrepackedWeights& w, int64_t m) const {
    GemmArgs g;
    g.m = m, g.n = w.n, g.k = w.k;
    g.b = w.tensor();
    g.b_prepacked = true, g.weights_static = true;
    g.workspace = workspace_.get(), g.workspace_bytes = int64_t(workspace_.bytes());
    if (runs_w4a8(acts_)) g.precision = GemmPrecision::w4a8;
    return g;
  }
  GemmArgs gate_up_args(int64_t m) const {
    GemmArgs g = gemm_args(gate_up_, m);
    if (norm_in_gate_up_) {
      g.a = x_.get(), g.a_rmsnorm_weight = norm_weight_.get();  // (eps: rmsnorm_quantize's default, as the chain's)
    } else if (bf16_in_) {
      g.a = m_.moe() ? x_.get() : normed_.get();
    } else {
      g.a_dtype = DType::nvfp4, g.a_fp4 = xq_.input(kInputScale);
    }
    g.d = h_.get();
    if (!fused_) return g;
    g.epilogue = GemmEpilogue::swiglu;  // h_: [m, inter] BF16; W4A4: hq_, NVFP4
    if (!bf16_in_) g.d = nullptr, g.d_dtype = DType::nvfp4, g.d_fp4 = hq_.output(kInputScale);
    return g;
  }
  GemmArgs down_args(int64_t m) const {
    GemmArgs g = gemm_args(down_, m);
    if (fused_ && bf16_in_)
      g.a = h_.get();
    else
      g.a_dtype = DType::nvfp4, g.a_fp4 = hq_.input(fused_ ? kInputScale : 0);
    g.d = m_.moe() ? y_.get() : out_.get();
    return g;
  }
  GemmArgs dense_gate_up() const { return gate_up_args(tokens_); }
  GemmArgs dense_down() const { return down_args(tokens_); }
  GroupedGemmArgs grouped(GemmArgs g) const {
    GroupedGemmArgs gg;
    gg.gemm = g, gg.groups = m_.groups(), gg.group_ends = group_ends_.as<int32_t>();
    return gg;
  }
  GroupedGemmArgs grouped_gate_up() const {
    GroupedGemmArgs g = grouped(gate_up_args(rows_));
    g.row_index = row_index_.as<int32_t>(), g.a_rows = tokens_;  // the tokens read in sorted order, no copy
    return g;
  }
  GroupedGemmArgs grouped_down() const { return grouped(down_args(rows_)); }
  const void* router_weights(int r) const {
    return !bf16_in_ ? staged_weights_.get() : weights_[size_t(r)].get();
  }
  // down with the router-weighted combine in its epilogue (GemmEpilogue::moe_combine)
  GroupedGemmArgs combined_down(int r) const {
    GroupedGemmArgs g = grouped_down();
    g.gemm.epilogue = GemmEpilogue::moe_combine;
    g.combine.positions = positions_.as<int32_t>(), g.combine.row_token = row_index_.as<int32_t>();
    g.combine.weights = router_weights(r);
    g.combine.tokens = tokens_, g.combine.topk = m_.choices(), g.combine.out = out_.get();
    g.combine.counters = counters_.get(), g.combine.counters_bytes = int64_t(counters_.bytes());
    return g;
  }
  SwigluQuantizeArgs swiglu() const {
    SwigluQuantizeArgs sw;
    sw.in = h_.get(), sw.rows = rows_, sw.k = m_.inter;
    sw.out = hq_.output(0);
    return sw;
  }

  const BlockModel& m_;
  const PrepackedWeights &gate_up_, &down_;
  int64_t tokens_;
  Activations acts_;
  bool fused_, fused_combine_, norm_in_gate_up_;
  bool bf16_in_;  // BF16 activations into gate_up (W4A16, W4A8), and with `fused_` SwiGLU's BF16 rows into down
  int64_t rows_;  // rows of the GEMMs: tokens, or tokens x choices routed
  DeviceBuffer x_;
  Nvfp4Rows xq_;
  DeviceBuffer h_;
  Nvfp4Rows hq_;
  DeviceBuffer y_, out_;
  std::vector<std::vector<int32_t>> choices_;
  std::vector<DeviceBuffer> ids_, weights_;
  DeviceBuffer staged_ids_, staged_weights_, group_ends_, row_index_, positions_, route_workspace_, workspace_, counters_;
  DeviceBuffer norm_weight_, normed_;
};

// kBlocksPerGraph blocks captured into one graph on `stream`; launches counts its kernels per block.
class BlockGraph {
 public:
  BlockGraph(const Block& block, CUstream stream) {
    const Driver& d = driver();
    for (int r = 0; r < kBlocksPerGraph; ++r) block.run(r, stream);  // loads anything prewarm left out, checks every argument
    check_cu(d.cuStreamSynchronize(stream), "cuStreamSynchronize");
    CUgraph graph = nullptr;
    check_cu(d.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture");
    try {
      for (int r = 0; r < kBlocksPerGraph; ++r) block.run(r, stream);
    } catch (...) {
      d.cuStreamEndCapture(stream, &graph);
      if (graph) d.cuGraphDestroy(graph);
      throw;
    }
    check_cu(d.cuStreamEndCapture(stream, &graph), "cuStreamEndCapture");
    size_t nodes = 0;
    const CUresult counted = d.cuGraphGetNodes(graph, nullptr, &nodes);
    const CUresult made = d.cuGraphInstantiateWithFlags(&exec_, graph, 0);
    d.cuGraphDestroy(graph);
    check_cu(counted, "cuGraphGetNodes");
    check_cu(made, "cuGraphInstantiateWithFlags");
    launches_ = double(nodes) / kBlocksPerGraph;
  }
  ~BlockGraph() {
    if (exec_) driver().cuGraphExecDestroy(exec_);
  }
  BlockGraph(const BlockGraph&) = delete;
  BlockGraph& operator=(const BlockGraph&) = delete;
  void launch(CUstream stream) const { check_cu(driver().cuGraphLaunch(exec_, stream), "cuGraphLaunch"); }
  double launches() const { return launches_; }

 private:
  CUgraphExec exec_ = nullptr;
  double launches_ = 0;
};

// Bytes a block must move at least: the weights its routings touch (their mean over the
// graph's blocks), the block's input and output rows (BF16).
double floor_bytes(const BlockModel& m, const Block& block, const PrepackedWeights& gate_up, const PrepackedWeights& down,
                   int64_t tokens) {
  double groups = 0;
  for (int r = 0; r < kBlocksPerGraph; ++r) groups += double(block.groups_touched(r));
  groups /= kBlocksPerGraph;
  return groups * double(gate_up.bytes_per_group() + down.bytes_per_group()) + 2.0 * 2 * tokens * m.hidden;
}

// The block's multiply-adds, twice: every routed row through gate_up and down.
double block_flops(const BlockModel& m, int64_t tokens) {
  const double rows = double(tokens) * (m.moe() ? m.choices() : 1);
  return 2.0 * rows * 3.0 * double(m.inter) * double(m.hidden);
}

// Compiles every kernel the block's ops use at its shapes (all token counts) and loads them.
void prewarm_block(const BlockModel& m) {
  const int32_t groups = m.moe() ? m.groups() : 1;
  const PrewarmShape gate_up{2 * m.inter, m.hidden, groups}, down{m.hidden, m.inter, groups};
  // (shapes, variants): the chain's GEMMs, the fused gate_up, the MoE down with the combine, the
  // W4A8 rows' GEMMs (on NVFP4 or BF16 rows) and their fused gate_up (BF16 or NVFP4 D)
  std::vector<std::pair<std::vector<PrewarmShape>, const char*>> runs{
      {{gate_up, down}, "b-layout=prepacked"},
      {{gate_up}, "b-layout=prepacked epilogue=swiglu d-dtype=bf16,nvfp4"},
      {{gate_up, down}, "b-layout=prepacked precision=w4a8"},
      {{gate_up}, "b-layout=prepacked epilogue=swiglu d-dtype=bf16,nvfp4 precision=w4a8"}};
  if (m.moe()) runs.push_back({{down}, "b-layout=prepacked epilogue=moe-combine grouped=contiguous"});
  PrewarmResult result;
  for (const auto& [shapes, variants] : runs) {
    PrewarmOptions options;
    options.shapes = shapes, options.variants = variants, options.load = true;
    const PrewarmResult r = prewarm(options);
    result.kernels += r.kernels, result.compiled += r.compiled, result.seconds += r.seconds, result.failed += r.failed;
  }
  std::printf("  %s: prewarm %lld kernels (%lld compiled) in %.1f s%s\n", m.name, (long long)result.kernels,
              (long long)result.compiled, result.seconds, result.failed ? ", some failed (compiled on first use)" : "");
}

struct StreamHolder {
  CUstream stream = nullptr;
  StreamHolder() { check_cu(driver().cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate"); }
  ~StreamHolder() { driver().cuStreamDestroy(stream); }
};

}  // namespace

std::vector<std::string> block_names() {
  std::vector<std::string> names;
  for (const BlockModel& b : kBlocks) names.push_back(b.name);
  return names;
}

Json bench_block(bool quick, const BlockBenchFilter& only) {
  std::mt19937 rng(std::random_device{}());
  EventTimer timer;
  StreamHolder s;
  const int runs = quick ? 5 : 15;
  const double copy_bps = copy_bandwidth(timer);
  const std::vector<int64_t> token_counts =
      !only.tokens.empty() ? only.tokens : quick ? std::vector<int64_t>{1, 16} : std::vector<int64_t>{1, 16, 128, 4096};
  std::printf("bench block: decoder blocks as an engine runs them, today's public ops chained, prepacked NVFP4 weights;\n");
  std::printf("  %d blocks with %d routings (uniform, or Zipf s = 1.2 over experts in a random order) in one CUDA graph,\n",
              kBlocksPerGraph, kBlocksPerGraph);
  std::printf("  GPU time of the graph / %d, median of %d runs (L2 flushed before each). W4A16: BF16 activations into\n",
              kBlocksPerGraph, runs);
  std::printf("  gate_up; W4A4: the block's input quantized first (moe_stage, or rmsnorm_quantize's NVFP4). Both take\n"
              "  SwiGLU's NVFP4 into down (swiglu_quantize writes no BF16). DeepSeek-V3's shared expert runs as expert 256,\n"
              "  every token's 9th choice at weight 1. The MLP has no residual add (no op writes one).\n");
  std::printf("  floor: the touched weights (prepacked NVFP4) plus the block's BF16 input and output at %.0f GB/s (copy)\n",
              copy_bps / 1e9);
  std::printf("  W4A8 (from %lld tokens): the W4A16 rows with both GEMMs in the W4A8 precision (opt-in, FP8 tensor cores);\n"
              "  W4A4/8: the W4A4 rows so\n",
              (long long)kW4A8Tokens);
  std::printf("  TFLOP/s: the block's products (every routed row through gate_up and down) over the chain's time\n");
  std::printf("  fused: gate_up with the SwiGLU epilogue (no swiglu_quantize): W4A16 its BF16 rows into a W4A16 down, W4A4\n"
              "  its rows as NVFP4 (a static scale) into down; +fold: fused and one fold more, an MoE\n"
              "  block's down with the router-weighted combine in its epilogue (no moe_combine), the dense W4A16 MLP's\n"
              "  gate_up normalizing its input itself (a_rmsnorm_weight: no rmsnorm_quantize); the graphs timed in turns\n");
  std::printf("  %-18s %6s %-8s %-6s %9s %9s %9s %9s %8s %9s %9s %9s %9s %9s %9s %9s\n", "block", "tokens", "routing", "acts",
              "launches", "floor us", "chain us", "/ floor", "TFLOP/s", "launches", "fused us", "/ floor", "/ chain",
              "launches", "+fold us", "/ chain");
  Json rows = Json::array();
  for (const BlockModel& m : kBlocks) {
    if (!only.blocks.empty() && std::find(only.blocks.begin(), only.blocks.end(), m.name) == only.blocks.end()) continue;
    prewarm_block(m);
    const int64_t groups = m.moe() ? m.groups() : 1;
    const PrepackedWeights gate_up(2 * m.inter, m.hidden, groups, rng, true), down(m.hidden, m.inter, groups, rng);
    check_cu(driver().cuCtxSynchronize(), "cuCtxSynchronize");
    for (int64_t tokens : token_counts)
      for (RoutingDraw routing : {RoutingDraw::uniform, RoutingDraw::zipf}) {
        if (!m.moe() && routing == RoutingDraw::zipf) continue;
        for (Activations acts : {Activations::w4a16, Activations::w4a4, Activations::w4a8, Activations::w4a4_w4a8}) {
          if (runs_w4a8(acts) && tokens < kW4A8Tokens) continue;
          const Block block(m, gate_up, down, tokens, acts, routing, rng, Fusion::chain),
              fused_block(m, gate_up, down, tokens, acts, routing, rng, Fusion::fused);
          const BlockGraph graph(block, s.stream), fused_graph(fused_block, s.stream);
          // +fold: the combine in an MoE block's down, the RMSNorm in the dense W4A16 MLP's gate_up
          std::unique_ptr<Block> more_block;
          std::unique_ptr<BlockGraph> more_graph;
          if (!runs_w4a8(acts) && (m.moe() || acts == Activations::w4a16)) {
            more_block = std::make_unique<Block>(m, gate_up, down, tokens, acts, routing, rng, Fusion::fold);
            more_graph = std::make_unique<BlockGraph>(*more_block, s.stream);
          }
          std::vector<const BlockGraph*> graphs{&graph, &fused_graph};
          if (more_graph) graphs.push_back(more_graph.get());
          std::vector<std::vector<double>> times(graphs.size());
          for (int r = 0; r < runs + 1; ++r)  // in turns
            for (size_t i = 0; i < graphs.size(); ++i) {
              timer.start(s.stream);
              graphs[i]->launch(s.stream);
              const double t = timer.stop_ms(s.stream) * 1e3 / kBlocksPerGraph;
              if (r > 0) times[i].push_back(t);  // the first replay uploads the graph
            }
          const double chain_us = median(times[0]), fused = median(times[1]);
          const double more = more_graph ? median(times[2]) : 0.0;
          const double floor_us = floor_bytes(m, block, gate_up, down, tokens) / copy_bps * 1e6;
          const char* routing_name = !m.moe() ? "-" : routing == RoutingDraw::zipf ? "zipf" : "uniform";
          const char* acts_name = acts == Activations::w4a4      ? "W4A4"
                                  : acts == Activations::w4a8      ? "W4A8"
                                  : acts == Activations::w4a4_w4a8 ? "W4A4/8"
                                                                   : "W4A16";
          const double tflops = block_flops(m, tokens) / chain_us / 1e6;
          const std::string more_cols = more_graph
                                            ? fmt::format(" {:9.1f} {:9.1f} {:9.2f}", more_graph->launches(), more, more / chain_us)
                                            : fmt::format(" {:>9} {:>9} {:>9}", "-", "-", "-");
          std::printf("  %-18s %6lld %-8s %-6s %9.1f %9.1f %9.1f %9.2f %8.1f %9.1f %9.1f %9.2f %9.2f%s\n", m.name,
                      (long long)tokens, routing_name, acts_name, graph.launches(), floor_us, chain_us, chain_us / floor_us,
                      tflops, fused_graph.launches(), fused, fused / floor_us, fused / chain_us, more_cols.c_str());
          std::fflush(stdout);
          Json row = {{"block", m.name}, {"tokens", tokens}, {"routing", routing_name}, {"activations", acts_name},
                      {"launches", graph.launches()}, {"floor_us", rounded(floor_us, 3)}, {"chain_us", rounded(chain_us, 3)},
                      {"tflops", rounded(tflops, 2)}, {"fused_launches", fused_graph.launches()},
                      {"fused_us", rounded(fused, 3)}};
          if (more_graph) {
            const std::string fold = m.moe() ? "fused_combine" : "fused_norm";
            row[fold + "_launches"] = more_graph->launches(), row[fold + "_us"] = rounded(more, 3);
          }
          rows.push_back(row);
        }
      }
  }
  return {{"copy_gbs", rounded(copy_bps / 1e9, 1)}, {"blocks_per_graph", kBlocksPerGraph}, {"runs", runs}, {"rows", rows}};
}

}  // namespace nvfp4::jit::cli
