// grouped_gemm (W4A4) on the Blackwell backends, sm_120a / sm_121a and sm_100a / sm_103a:
// natively there, exactly emulated on sm_90a (on_blackwell_backend.hpp). Against a float64 reference per expert: fresh random NVFP4
// activations and per-expert weights whose global scales lie 2^10 apart, group sizes with
// empty and one-row experts, D poisoned so that every row of an expert must be written and
// every other row (and D's padding) left alone. Both layouts, both scale layouts on each
// operand, A's global scale per tensor (host, device), per row and per expert, A's rows gathered
// through row_index (an index outside A gives a NaN row), one expert-parallel rank's experts routed by
// moe_route, bias and alpha, G in {1, 8, 128}, and a CUDA graph replayed with new routing.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <string>

#include "../dequantize_fixture.hpp"
#include "gemm_output.hpp"
#include "on_blackwell_backend.hpp"
#include "core/driver.hpp"
#include "core/gpu_util.hpp"
#include "ops/gemm/gemm.hpp"
#include "ops/gemm/sm100/tiles.hpp"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;

namespace {

enum class AScale { host, device, per_row, per_group };

struct Experts {
  GroupedLayout layout = GroupedLayout::contiguous;
  int groups = 8;
  int64_t m = 96, n = 200, k = 256;  // contiguous: rows of A and D; masked: rows per group
  ScaleLayout w_layout = ScaleLayout::linear;  // A's scales take the other layout
  DType d = DType::fp32;
  AScale a_scale = AScale::host;
  bool gather = false;    // contiguous: A's rows through row_index from fewer tokens, one index outside A
  bool ep_rank = false;  // contiguous: routed by moe_route from the ids of 4x more experts, this rank's 2nd quarter
  int bias = 0;           // 0 none, 1 bf16, 2 fp32
  float alpha = 1.0f;
  int64_t d_pad = 0;      // D's row stride n + d_pad
  int64_t a_pad = 0;      // bytes after each packed row of A (4: rows not 16-byte aligned)
  GemmTile tile{};      // a given tile (grouped_gemm_with_tile), else the chosen one
};

// The worst relative error against float64 per output type, over the suite's cases.
std::map<int, double>& worst_error() {
  static std::map<int, double> worst;
  return worst;
}

std::string dtype_label(DType d) { return d == DType::fp32 ? "fp32" : d == DType::bf16 ? "bf16" : "fp16"; }

// One routing: each expert's rows [begin, end) of A and D, what the device reads (ends or
// counts), and row_index (the token of each row; -1 past the routed rows).
struct Routing {
  std::vector<std::pair<int64_t, int64_t>> rows;
  std::vector<int32_t> sizes, index;
  int64_t nan_row = -1;  // a routed row whose index lies outside A
};

Routing draw_routing(const Experts& c, int64_t rows, int64_t tokens, std::mt19937& rng) {
  Routing r;
  const bool masked = c.layout == GroupedLayout::masked;
  int64_t end = 0;
  for (int g = 0; g < c.groups; ++g) {
    // experts 1, 5, 9, ... empty, 2, 6, ... one row, 3, 7, ... (masked) full
    const int64_t drawn = g % 4 == 1                ? 0
                          : g % 4 == 2              ? 1
                          : masked && g % 4 == 3    ? c.m
                          : masked                  ? int64_t(rng() % uint64_t(c.m + 1))
                                                    : 1 + int64_t(rng() % uint64_t(2 * c.m / c.groups + 1));
    if (masked) {
      const int64_t n = std::min(drawn, c.m);
      r.rows.push_back({g * c.m, g * c.m + n});
      r.sizes.push_back(int32_t(n));
    } else {
      const int64_t n = std::min(drawn, c.m - 1 - end);  // the last row stays no expert's
      r.rows.push_back({end, end + n});
      end += n;
      r.sizes.push_back(int32_t(end));
    }
  }
  r.index.assign(size_t(rows), -1);
  const int64_t routed = masked ? rows : end;
  for (int64_t i = 0; i < routed; ++i) r.index[size_t(i)] = c.gather ? int32_t(rng() % uint64_t(tokens)) : int32_t(i);
  if (c.gather && end > 0) {
    r.nan_row = int64_t(rng() % uint64_t(end));
    r.index[size_t(r.nan_row)] = int32_t(tokens);  // one past A's rows
  }
  return r;
}

// moe_route's routing of random top-4 ids over 4x the groups' experts, this rank holding the
// second quarter of them; read back for the reference.
Routing route_on_device(const Experts& c, int64_t tokens, DeviceBuffer& ends, DeviceBuffer& index, std::mt19937& rng) {
  const int topk = 4, experts = 4 * c.groups;
  std::vector<int32_t> ids(size_t(tokens * topk));
  for (auto& id : ids) id = int32_t(rng() % uint64_t(experts + 1)) - 1;  // -1: a padding token's
  DeviceBuffer d_ids = to_device(ids);
  MoeRouteArgs route;
  route.topk_ids = d_ids.get();
  route.tokens = tokens, route.topk = topk, route.groups = c.groups, route.first_expert = c.groups;
  route.group_ends = ends.as<int32_t>(), route.row_index = index.as<int32_t>();
  moe_route(route, nullptr);
  check_cu(driver().cuCtxSynchronize(), "moe_route");
  Routing r;
  r.sizes.resize(size_t(c.groups));
  r.index.resize(size_t(tokens * topk));
  ends.download(r.sizes.data(), r.sizes.size() * 4);
  index.download(r.index.data(), r.index.size() * 4);
  for (int g = 0; g < c.groups; ++g) r.rows.push_back({g ? r.sizes[size_t(g - 1)] : 0, r.sizes[size_t(g)]});
  return r;
}

// One call captured in a CUDA graph, replayed on demand.
struct Graph {
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  template <class Call>
  void capture(CUstream stream, Call call) {
    check_cu(driver().cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture");
    call();
    check_cu(driver().cuStreamEndCapture(stream, &graph), "cuStreamEndCapture");
    check_cu(driver().cuGraphInstantiateWithFlags(&exec, graph, 0), "cuGraphInstantiate");
  }
  void replay(CUstream stream) const { check_cu(driver().cuGraphLaunch(exec, stream), "cuGraphLaunch"); }
  ~Graph() {
    if (exec) driver().cuGraphExecDestroy(exec);
    if (graph) driver().cuGraphDestroy(graph);
  }
};

// Runs `c` (captured and replayed `replays` times with new routing and per-expert A scales
// where replays > 0) and checks every element of D.
void run_experts(const Experts& c, std::mt19937& rng, int replays = 0) {
  CAPTURE(int(c.layout));
  CAPTURE(c.groups);
  CAPTURE(c.m);
  CAPTURE(c.n);
  CAPTURE(c.k);
  CAPTURE(c.tile.block_m);
  CAPTURE(c.tile.block_n);
  const bool masked = c.layout == GroupedLayout::masked, gathers = c.gather || c.ep_rank;
  const int64_t rows = masked ? c.m * c.groups : c.m;
  const int64_t tokens = c.ep_rank ? c.m / 4 : c.gather ? rows / 2 + 3 : rows;  // rows of A
  const ScaleLayout a_layout = c.w_layout == ScaleLayout::linear ? ScaleLayout::swizzled128x4 : ScaleLayout::linear;

  std::vector<testutil::HostNvfp4> w;
  std::vector<uint8_t> w_packed, w_scales;
  std::vector<float> gw;
  for (int g = 0; g < c.groups; ++g) {
    w.emplace_back(c.n, c.k, c.w_layout, rng);
    w_packed.insert(w_packed.end(), w.back().packed.begin(), w.back().packed.end());
    w_scales.insert(w_scales.end(), w.back().scales.begin(), w.back().scales.end());
    gw.push_back(std::ldexp(1.0f + (rng() % 100) / 100.0f, g % 2 ? -14 : -4));  // 2^10 apart
  }
  const testutil::HostNvfp4 a(tokens, c.k, a_layout, rng, c.a_pad);
  std::vector<double> ad(size_t(tokens * c.k));
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t k = 0; k < c.k; ++k) ad[size_t(t * c.k + k)] = a.value(t, k);
  const float ga = std::ldexp(1.0f + (rng() % 100) / 100.0f, -3);
  std::vector<float> ga_group(size_t(c.groups));
  std::vector<uint8_t> bias_bytes(size_t(c.n) * 4);
  std::vector<double> bias(size_t(c.n), 0.0);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t n = 0; n < c.n && c.bias; ++n) {
    const float v = normal(rng);
    const uint16_t h = nvfp4k::float_to_bf16_bits(v);
    if (c.bias == 1) std::memcpy(&bias_bytes[size_t(n) * 2], &h, 2);
    else std::memcpy(&bias_bytes[size_t(n) * 4], &v, 4);
    bias[size_t(n)] = c.bias == 1 ? double(nvfp4k::bf16_bits_to_float(h)) : double(v);
  }

  const int esize = c.d == DType::fp32 ? 4 : 2;
  const int64_t ldd = c.n + c.d_pad;
  DeviceBuffer d_w = to_device(w_packed), d_ws = to_device(w_scales), d_gw = to_device(gw), d_a = to_device(a.packed),
               d_as = to_device(a.scales), d_ga = to_device(std::vector<float>{ga}), d_ga_rows = to_device(a.row_scales),
               d_ga_group(size_t(c.groups) * 4), d_bias = to_device(bias_bytes), d_sizes(size_t(c.groups) * 4),
               d_index(size_t(rows) * 4), d_out(size_t(rows * ldd * esize));

  GroupedGemmArgs g;
  g.groups = c.groups;
  g.layout = c.layout;
  g.gemm.m = c.m, g.gemm.n = c.n, g.gemm.k = c.k;
  g.gemm.a_dtype = DType::nvfp4;
  g.gemm.a_fp4 = {d_a.get(), a.stride_bytes, d_as.get(), a_layout, {ga, nullptr, false}};
  if (c.a_scale == AScale::device) g.gemm.a_fp4.global_scale.device_ptr = d_ga.as<float>();
  if (c.a_scale == AScale::per_row) g.gemm.a_fp4.global_scale = {1.0f, d_ga_rows.as<float>(), true};
  if (c.a_scale == AScale::per_group) {
    g.gemm.a_fp4.global_scale = {1.0f, d_ga_group.as<float>(), false};
    g.a_global_scale_per_group = true;
  }
  if (gathers) g.row_index = d_index.as<int32_t>(), g.a_rows = tokens;
  g.gemm.b = {d_w.get(), 0, d_ws.get(), c.w_layout, {1.0f, d_gw.as<float>(), true}};
  g.gemm.d = d_out.get(), g.gemm.d_dtype = c.d, g.gemm.d_row_stride = ldd;
  if (c.bias) g.gemm.bias = d_bias.get(), g.gemm.bias_dtype = c.bias == 1 ? DType::bf16 : DType::fp32;
  g.gemm.alpha = c.alpha;
  (masked ? g.masked_m : g.group_ends) = d_sizes.as<int32_t>();

  CUstream stream = nullptr;
  check_cu(driver().cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  Graph graph;
  for (int round = 0; round <= replays; ++round) {
    const Routing r = c.ep_rank ? route_on_device(c, tokens, d_sizes, d_index, rng) : draw_routing(c, rows, tokens, rng);
    if (!c.ep_rank) {
      d_sizes.upload(r.sizes.data(), r.sizes.size() * 4);
      d_index.upload(r.index.data(), r.index.size() * 4);
    }
    for (int e = 0; e < c.groups; ++e) ga_group[size_t(e)] = ga * std::ldexp(1.0f, int(rng() % 5) - 2);
    d_ga_group.upload(ga_group.data(), ga_group.size() * 4);
    d_out.fill(0xFF);  // NaN in every output type
    auto run = [&] { c.tile.block_m ? grouped_gemm_with_tile(g, c.tile, stream) : grouped_gemm(g, stream); };
    if (replays == 0 || !graph.exec) run();  // eager; before the capture, it loads the kernel
    if (replays > 0) {
      check_cu(driver().cuStreamSynchronize(stream), "eager grouped_gemm");
      d_out.fill(0xFF);
      if (!graph.exec) graph.capture(stream, run);
      graph.replay(stream);
    }
    check_cu(driver().cuStreamSynchronize(stream), "grouped_gemm");
    std::vector<uint8_t> got(d_out.bytes());
    d_out.download(got.data(), got.size());

    auto poisoned = [&](size_t at) { return std::all_of(&got[at], &got[at] + esize, [](uint8_t b) { return b == 0xFF; }); };
    std::vector<int> expert_of(size_t(rows), -1);
    for (int e = 0; e < c.groups; ++e)
      for (int64_t i = r.rows[size_t(e)].first; i < r.rows[size_t(e)].second; ++i) expert_of[size_t(i)] = e;
    testutil::FrobeniusError error;
    bool ok = true;
    std::vector<double> wd(size_t(c.n * c.k));
    for (int e = -1; e < c.groups && ok; ++e) {  // -1: the rows of no expert
      if (e >= 0)
        for (int64_t n = 0; n < c.n; ++n)
          for (int64_t k = 0; k < c.k; ++k) wd[size_t(n * c.k + k)] = w[size_t(e)].value(n, k);
      for (int64_t i = 0; i < rows && ok; ++i) {
        if (expert_of[size_t(i)] != e) continue;
        const int64_t src = gathers ? r.index[size_t(i)] : i;
        const double a_gs = c.a_scale == AScale::per_row     ? a.row_scales[size_t(i)]
                            : c.a_scale == AScale::per_group ? ga_group[size_t(e)]
                                                             : ga;
        for (int64_t n = 0; n < ldd && ok; ++n) {
          const size_t at = size_t(i * ldd + n) * esize;
          const double v = testutil::output_value(c.d, &got[at]);
          if (e < 0 || n >= c.n) {
            if (!poisoned(at)) {
              FAIL_CHECK("round " << round << ": element (" << i << ", " << n << ") of no expert's row or D's padding was written");
              ok = false;
            }
            continue;
          }
          if (i == r.nan_row) {  // a NaN the kernel wrote, not the poison's
            if (!std::isnan(v) || poisoned(at)) {
              FAIL_CHECK("round " << round << ": element (" << i << ", " << n << ") = " << v
                                  << ", expected the NaN of a row index outside A");
              ok = false;
            }
            continue;
          }
          double s = 0;
          for (int64_t k = 0; k < c.k; ++k) s += ad[size_t(src * c.k + k)] * wd[size_t(n * c.k + k)];
          const double ref = c.alpha * double(gw[size_t(e)]) * a_gs * s + bias[size_t(n)];
          if (!std::isfinite(v)) {
            FAIL_CHECK("round " << round << ": expert " << e << ", first unwritten or non-finite element (" << i << ", " << n
                                << ") = " << v << ", expected " << ref);
            ok = false;
            continue;
          }
          error.add(v, ref);
        }
      }
    }
    if (!ok) break;
    const double rel = error.relative();
    double& worst = worst_error()[int(c.d)];
    worst = std::max(worst, rel);
    MESSAGE(std::string(masked ? "masked" : "contiguous") << " G=" << c.groups << " m=" << c.m << " n=" << c.n << " k=" << c.k << " "
                                              << dtype_label(c.d) << " round " << round << ": relative error " << rel);
    CHECK(rel < testutil::rounding_bound(c.d));
  }
  driver().cuStreamDestroy(stream);
}

constexpr ScaleLayout lin = ScaleLayout::linear, sw = ScaleLayout::swizzled128x4;
constexpr GroupedLayout contiguous = GroupedLayout::contiguous, masked = GroupedLayout::masked;
constexpr DType bf16 = DType::bf16, fp16 = DType::fp16, fp32 = DType::fp32;

// `c` on the sm_100a backend's tile of block_n weight rows (ctas 2: a CTA pair's)
Experts with_tile(Experts c, int block_n, int stages, int ctas) {
  c.tile = sm100::Tiles::to_config({block_n, stages, ctas});
  return c;
}

}  // namespace

TEST_SUITE("gpu_grouped_gemm_sm120") {
  TEST_CASE("sm_120a grouped W4A4 against a float64 reference: layouts, scale kinds, gathered rows, G 1 to 128") {
    const test::OnSm120Backend on;
    if (!on.ready()) return;
    std::mt19937 rng(std::random_device{}());
    // fields: layout, G, m, n, k, W's scale layout (A's the other), D, A's global scale, gather,
    // ep_rank, bias, alpha, d_pad, a_pad
    const Experts cases[] = {
        {contiguous, 1, 300, 200, 512, lin, fp32, AScale::host},
        {contiguous, 8, 256, 2880, 1024, sw, bf16, AScale::device, false, false, 1},
        {contiguous, 8, 200, 200, 96, lin, fp32, AScale::per_row, false, false, 0, -2.0f, 5},
        {contiguous, 8, 160, 1000, 224, lin, fp32, AScale::per_group, true, false, 2},
        {contiguous, 128, 600, 256, 512, sw, bf16, AScale::per_group, true},
        {contiguous, 8, 1000, 512, 2048, sw, fp32, AScale::host, true},
        {masked, 8, 40, 200, 256, sw, fp32, AScale::per_row},
        {masked, 128, 12, 136, 256, lin, bf16, AScale::per_group},
        {masked, 1, 700, 72, 2048, sw, fp16, AScale::host, false, false, 0, 1.0f / 256},
        {contiguous, 8, 600, 256, 512, lin, bf16, AScale::per_group, false, true},  // an EP rank via moe_route
        {contiguous, 128, 2400, 72, 256, sw, fp32, AScale::device, false, true, 2},  // an EP rank, 128 of 512 experts
    };
    for (const Experts& c : cases) run_experts(c, rng);
    for (const auto& [d, e] : worst_error()) MESSAGE("worst relative error so far, " << dtype_label(DType(d)) << ": " << e);
  }

  // Small enough for compute-sanitizer (memcheck, racecheck): gathered and masked rows, A's rows
  // by 16 and by 4 bytes, A's scales as words and by byte (K = 96), ragged N and K.
  TEST_CASE("sm_120a grouped small shapes for the sanitizers") {
    const test::OnSm120Backend on;
    if (!on.ready()) return;
    std::mt19937 rng(std::random_device{}());
    const Experts cases[] = {
        {contiguous, 8, 40, 72, 160, sw, fp32, AScale::per_group, true},
        {masked, 3, 9, 64, 96, sw, bf16, AScale::per_row, false, false, 0, 1.0f, 0, 4},
        {contiguous, 4, 50, 136, 224, lin, fp32, AScale::host, true, false, 1, 1.0f, 0, 4},
    };
    for (const Experts& c : cases) run_experts(c, rng);
  }

  TEST_CASE("sm_120a grouped gemm captured in a graph replays with the routing and A's scales changed") {
    const test::OnSm120Backend on;
    if (!on.ready()) return;
    std::mt19937 rng(std::random_device{}());
    run_experts({contiguous, 8, 128, 200, 256, sw, fp32, AScale::per_group, true}, rng, 3);
    run_experts({masked, 8, 32, 128, 256, lin, bf16, AScale::per_group}, rng, 2);
    for (const auto& [d, e] : worst_error()) MESSAGE("worst relative error, " << dtype_label(DType(d)) << ": " << e);
  }
}

// The sm_100a backend takes K in whole MMAs of 64 and A's rows 16-byte aligned: the same matrix
// with K a multiple of 64 and A's rows unpadded.
TEST_SUITE("gpu_grouped_gemm_sm100") {
  TEST_CASE("sm_100a grouped W4A4 against a float64 reference: layouts, scale kinds, gathered rows, G 1 to 128") {
    const test::OnSm100Backend on;
    if (!on.ready()) return;
    std::mt19937 rng(std::random_device{}());
    const Experts cases[] = {
        {contiguous, 1, 300, 200, 512, lin, fp32, AScale::host},
        {contiguous, 8, 256, 2880, 1024, sw, bf16, AScale::device, false, false, 1},
        {contiguous, 8, 200, 200, 192, lin, fp32, AScale::per_row, false, false, 0, -2.0f, 5},
        {contiguous, 8, 160, 1000, 320, lin, fp32, AScale::per_group, true, false, 2},
        {contiguous, 128, 600, 256, 512, sw, bf16, AScale::per_group, true},
        {contiguous, 8, 1000, 512, 2048, sw, fp32, AScale::host, true},
        {masked, 8, 40, 200, 256, sw, fp32, AScale::per_row},
        {masked, 128, 12, 136, 256, lin, bf16, AScale::per_group},
        {masked, 1, 700, 72, 2048, sw, fp16, AScale::host, false, false, 0, 1.0f / 256},
        {contiguous, 8, 600, 256, 512, lin, bf16, AScale::per_group, false, true},   // an EP rank via moe_route
        {contiguous, 128, 2400, 72, 256, sw, fp32, AScale::device, false, true, 2},  // an EP rank, 128 of 512 experts
        // CTA pairs (.cta_group::2): 256-row tiles of the groups' rows, gathered and masked
        with_tile({contiguous, 8, 600, 256, 512, sw, bf16, AScale::per_group, true}, 128, 3, 2),
        with_tile({contiguous, 8, 1000, 300, 320, lin, fp32, AScale::per_row, false, false, 2, -2.0f, 5}, 256, 2, 2),
        with_tile({masked, 3, 300, 200, 256, lin, fp32, AScale::host}, 256, 4, 2),
    };
    for (const Experts& c : cases) run_experts(c, rng);
    for (const auto& [d, e] : worst_error()) MESSAGE("worst relative error so far, " << dtype_label(DType(d)) << ": " << e);
  }

  TEST_CASE("sm_100a grouped small shapes for the sanitizers") {
    const test::OnSm100Backend on;
    if (!on.ready()) return;
    std::mt19937 rng(std::random_device{}());
    const Experts cases[] = {
        {contiguous, 8, 40, 72, 192, sw, fp32, AScale::per_group, true},
        {masked, 3, 9, 64, 320, sw, bf16, AScale::per_row},
        {contiguous, 4, 50, 136, 256, lin, fp32, AScale::host, true, false, 1},
        // CTA pairs: both CTAs' rows, the ring wrapping; masked
        with_tile({contiguous, 4, 700, 136, 576, sw, fp32, AScale::per_group}, 128, 2, 2),
        with_tile({masked, 3, 300, 72, 256, lin, bf16, AScale::per_row}, 256, 2, 2),
    };
    for (const Experts& c : cases) run_experts(c, rng);
  }

  // Gathered rows (cp.async) on a wrapping ring, one CTA and a pair: memcheck. racecheck reports
  // the cp.async writes against the emulated MMA's shared memory loads once a stage is reused or
  // the stage's barrier is a pair's (docs/architecture.md, the sm_100a emulation).
  TEST_CASE("sm_100a grouped gathered rows on a wrapping ring, for memcheck") {
    const test::OnSm100Backend on;
    if (!on.ready()) return;
    std::mt19937 rng(std::random_device{}());
    const Experts cases[] = {
        with_tile({contiguous, 4, 300, 136, 576, lin, fp32, AScale::host, true}, 64, 2, 1),
        with_tile({contiguous, 4, 700, 136, 576, sw, fp32, AScale::per_group, true}, 128, 2, 2),
    };
    for (const Experts& c : cases) run_experts(c, rng);
  }

  TEST_CASE("sm_100a grouped gemm captured in a graph replays with the routing and A's scales changed") {
    const test::OnSm100Backend on;
    if (!on.ready()) return;
    std::mt19937 rng(std::random_device{}());
    run_experts({contiguous, 8, 128, 200, 256, sw, fp32, AScale::per_group, true}, rng, 3);
    run_experts({masked, 8, 32, 128, 256, lin, bf16, AScale::per_group}, rng, 2);
    run_experts(with_tile({contiguous, 4, 400, 128, 256, sw, fp32, AScale::per_group, true}, 128, 2, 2), rng, 2);
  }
}
