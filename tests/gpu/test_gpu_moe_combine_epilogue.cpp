// The MoE combine in the grouped down GEMM's epilogue (GemmEpilogue::moe_combine; sm_90a, and
// sm_100a / sm_120a natively or emulated on sm_90a with W4A4 on the weight as stored), on
// moe_route's rows of fresh random routings: ragged token counts, top-k 1, 4 and 8, padding ids
// (-1), empty experts, one expert-parallel rank's experts (ids of other ranks skipped), both
// weight layouts, BF16 / FP32 D, every output dtype, FP32 and BF16 router weights, counters the
// caller's or the library's. Per case:
// - against the unfused chain (the same grouped GEMM, then moe_combine): bit-identical D and
//   bit-identical output rows of every token with an entry on this rank; a token with none keeps
//   its (poisoned) output row untouched;
// - against float64 of the same math (out[t] = sum_j w[t, j] * D64[pos(t, j)], D64 the exact
//   products' sums): per element |y - r| <= sum_j |w_j| (rel_d |D64_j| + E_j) +
//   rel_out |r| + (topk + 1) 2^-24 sum_j |w_j D64_j| + 2^-140, with E_j = (k + 2) 2^-24 S_j the
//   fp32 sum's error (S_j the sum of |products| scaled), rel_d / rel_out twice D's / out's
//   rounding (2^-8 BF16, 2^-10 FP16, 2^-23 FP32) and the (topk + 1) term the fp32 FMAs';
// - run twice: the same bits; the counters zero after each call.
// A captured routing + fused GEMM, replayed with new ids, matches the eager chain each time.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "../dequantize_fixture.hpp"
#include "on_blackwell_backend.hpp"
#include "gemm_output.hpp"
#include "common/nvfp4_format.cuh"
#include "core/driver.hpp"
#include "core/gpu_util.hpp"
#include "nvfp4/jit.hpp"
#include "ops/spec_names.hpp"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;

namespace {

struct CombineCase {
  int64_t tokens, topk;
  int32_t experts;       // all ranks'
  int32_t groups;        // this rank's: experts [first, first + groups)
  int32_t first = 0;
  int64_t n = 512, k = 256;
  int padding = 0;       // one id in `padding` is -1 (0: none)
  bool skewed = false;   // most ids on three experts: the others empty
  bool prepacked = true;
  DType d = DType::bf16, out = DType::bf16, weights = DType::fp32;
  bool caller_counters = true;
  bool w4a4 = false;     // NVFP4 activations (the Blackwell backends; with prepacked false)
};

std::string describe(const CombineCase& c) {
  return fmt::format("tokens={} topk={} experts={} groups={} first={} n={} k={} padding={} skewed={} prepacked={} d={} "
                     "out={} weights={} caller_counters={}{}",
                     c.tokens, c.topk, c.experts, c.groups, c.first, c.n, c.k, c.padding, c.skewed, c.prepacked,
                     dtype_name(c.d), dtype_name(c.out), dtype_name(c.weights), c.caller_counters, c.w4a4 ? " W4A4" : "");
}

std::vector<int32_t> draw_ids(const CombineCase& c, std::mt19937& rng) {
  std::vector<int32_t> ids(size_t(c.tokens * c.topk));
  for (int64_t t = 0; t < c.tokens; ++t)
    for (int64_t j = 0; j < c.topk; ++j) {
      int32_t id;
      do {  // distinct experts per token, as a router picks them
        id = c.skewed && rng() % 8 ? int32_t(rng() % 3) : int32_t(rng() % uint32_t(c.experts));
      } while (std::find(&ids[size_t(t * c.topk)], &ids[size_t(t * c.topk + j)], id) != &ids[size_t(t * c.topk + j)] &&
               c.topk < c.experts && !c.skewed);
      if (c.padding && rng() % uint32_t(c.padding) == 0) id = -1;
      ids[size_t(t * c.topk + j)] = id;
    }
  return ids;
}

// A value of `dtype` as stored (FP32 or 16-bit), and back.
std::vector<uint8_t> encode(DType dtype, const std::vector<float>& v) {
  const size_t size = dtype == DType::fp32 ? 4 : 2;
  std::vector<uint8_t> bytes(v.size() * size);
  for (size_t i = 0; i < v.size(); ++i) {
    if (dtype == DType::fp32) {
      std::memcpy(&bytes[i * 4], &v[i], 4);
    } else {
      const uint16_t h = dtype == DType::bf16 ? nvfp4k::float_to_bf16_bits(v[i]) : nvfp4k::float_to_fp16_bits(v[i]);
      std::memcpy(&bytes[i * 2], &h, 2);
    }
  }
  return bytes;
}

double relative_rounding(DType d) { return d == DType::fp32 ? std::ldexp(1.0, -23) : d == DType::fp16 ? std::ldexp(1.0, -10) : std::ldexp(1.0, -8); }

// Everything a case runs on: the routing's outputs, the weights, A, and the outputs.
class CombineFixture {
 public:
  CombineFixture(const CombineCase& c, std::mt19937& rng)
      : c_(c), entries_(c.tokens * c.topk), w_(c.groups * c.n, c.k, ScaleLayout::linear, rng),
        a4_(c.w4a4 ? entries_ : 0, c.k, ScaleLayout::linear, rng),
        ids_(size_t(entries_ * 4)), ends_(size_t(c.groups) * 4), rows_(size_t(entries_ * 4)),
        positions_(size_t(entries_ * 4)), weights_(size_t(entries_ * 4)), d_fused_(size_t(entries_ * c.n * 4)), d_chain_(d_fused_.bytes()),
        out_fused_(size_t(c.tokens * c.n * 4)), out_chain_(out_fused_.bytes()),
        counters_(size_t(std::max<int64_t>(4, c.tokens * ((c.n + 63) / 64) * 4))) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    a_.resize(size_t(entries_ * c.k));
    for (auto& x : a_) x = nvfp4k::float_to_bf16_bits(normal(rng));
    d_a_ = to_device(a_);
    d_a4_ = to_device(a4_.packed), d_a4s_ = to_device(a4_.scales);
    d_w_ = to_device(w_.packed), d_s_ = to_device(w_.scales);
    if (c.prepacked) {
      const int64_t bytes = prepacked_bytes(c.n, c.k);
      d_pre_ = DeviceBuffer(size_t(bytes * c.groups));
      for (int32_t e = 0; e < c.groups; ++e) {
        PrepackArgs p;
        p.weight = {static_cast<unsigned char*>(d_w_.get()) + e * c.n * c.k / 2, 0,
                    static_cast<unsigned char*>(d_s_.get()) + e * c.n * (c.k / 16), ScaleLayout::linear, {}};
        p.n = c.n, p.k = c.k, p.out = static_cast<unsigned char*>(d_pre_.get()) + e * bytes;
        prepack(p, nullptr);
      }
    }
    gw_ = std::ldexp(1.0f + float(rng() % 100) / 100.0f, -10);
    counters_.fill(0);  // zero before the first call; each call leaves it so
  }

  // A new routing: ids and router weights uploaded (the device buffers stay where they are).
  void draw(std::mt19937& rng) {
    ids_host_ = draw_ids(c_, rng);
    ids_.upload(ids_host_.data(), ids_host_.size() * 4);
    std::uniform_real_distribution<float> u(0.05f, 1.0f);
    weights_host_.resize(size_t(entries_));
    for (auto& w : weights_host_) {
      w = u(rng);
      if (c_.weights == DType::bf16) w = nvfp4k::bf16_bits_to_float(nvfp4k::float_to_bf16_bits(w));
    }
    const std::vector<uint8_t> bytes = encode(c_.weights, weights_host_);
    weights_.upload(bytes.data(), bytes.size());
  }

  MoeRouteArgs route() const {
    MoeRouteArgs r;
    r.topk_ids = ids_.get(), r.tokens = c_.tokens, r.topk = c_.topk, r.groups = c_.groups, r.first_expert = c_.first;
    r.group_ends = ends_.as<int32_t>(), r.row_index = rows_.as<int32_t>(), r.positions = positions_.as<int32_t>();
    return r;
  }

  GroupedGemmArgs down(bool fused) const {
    GroupedGemmArgs ga;
    GemmArgs& g = ga.gemm;
    g.m = entries_, g.n = c_.n, g.k = c_.k;
    g.a = d_a_.get();
    if (c_.w4a4) g.a = nullptr, g.a_dtype = DType::nvfp4, g.a_fp4 = {d_a4_.get(), 0, d_a4s_.get(), ScaleLayout::linear, {kA4Scale, nullptr, false}};
    if (c_.prepacked) {
      g.b = {d_pre_.get(), 0, nullptr, ScaleLayout::linear, {gw_, nullptr, false}};
      g.b_prepacked = true;
    } else {
      g.b = {d_w_.get(), 0, d_s_.get(), ScaleLayout::linear, {gw_, nullptr, false}};
    }
    g.d = (fused ? d_fused_ : d_chain_).get(), g.d_dtype = c_.d;
    ga.groups = c_.groups, ga.group_ends = ends_.as<int32_t>();
    if (fused) {
      g.epilogue = GemmEpilogue::moe_combine;
      MoeCombineEpilogue& cb = ga.combine;
      cb.positions = positions_.as<int32_t>(), cb.row_token = rows_.as<int32_t>();
      cb.weights = weights_.get(), cb.weights_dtype = c_.weights;
      cb.tokens = c_.tokens, cb.topk = c_.topk;
      cb.out = out_fused_.get(), cb.out_dtype = c_.out;
      if (c_.caller_counters) cb.counters = counters_.get(), cb.counters_bytes = int64_t(counters_.bytes());
    }
    return ga;
  }

  MoeCombineArgs chain_combine() const {
    MoeCombineArgs cb;
    cb.d = d_chain_.get(), cb.d_dtype = c_.d, cb.d_rows = entries_;
    cb.positions = positions_.as<int32_t>(), cb.weights = weights_.get(), cb.weights_dtype = c_.weights;
    cb.tokens = c_.tokens, cb.topk = c_.topk, cb.n = c_.n;
    cb.out = out_chain_.get(), cb.out_dtype = c_.out;
    return cb;
  }

  // The chain (route, grouped GEMM, moe_combine) into the chain's buffers, synchronized.
  void run_chain() {
    moe_route(route(), nullptr);
    out_chain_.fill(0xFF);
    grouped_gemm(down(false), nullptr);
    moe_combine(chain_combine(), nullptr);
    check_cu(driver().cuCtxSynchronize(), "the unfused chain");
  }

  void poison_fused() {
    out_fused_.fill(0xFF);
    d_fused_.fill(0xFF);
  }

  // The fused output against the chain's (bits) and float64; poisoned rows of tokens without
  // an entry here. Returns false after reporting the first failure.
  bool check(const std::string& name) const {
    const int64_t n = c_.n, osize = c_.out == DType::fp32 ? 4 : 2, dsize = c_.d == DType::fp32 ? 4 : 2;
    std::vector<int32_t> positions(static_cast<size_t>(entries_)), ends(static_cast<size_t>(c_.groups));
    positions_.download(positions.data(), positions.size() * 4);
    ends_.download(ends.data(), ends.size() * 4);
    std::vector<uint8_t> fused(size_t(c_.tokens * n * osize)), chain(fused.size());
    out_fused_.download(fused.data(), fused.size());
    out_chain_.download(chain.data(), chain.size());
    const int64_t routed = c_.groups ? ends.back() : 0;
    std::vector<uint8_t> d_fused(size_t(routed * n * dsize)), d_chain(d_fused.size());
    d_fused_.download(d_fused.data(), d_fused.size());
    d_chain_.download(d_chain.data(), d_chain.size());
    if (const auto diff = std::mismatch(d_fused.begin(), d_fused.end(), d_chain.begin()); diff.first != d_fused.end()) {
      const int64_t at = (diff.first - d_fused.begin()) / dsize;
      FAIL_CHECK(name << ": D differs from the unfused GEMM's at row " << at / n << ", column " << at % n);
      return false;
    }
    // the group of each routed row, for the float64 products
    std::vector<int32_t> group_of(static_cast<size_t>(routed));
    for (int64_t r = 0, e = 0; r < routed; ++r) {
      while (r >= ends[size_t(e)]) ++e;
      group_of[size_t(r)] = int32_t(e);
    }
    testutil::FrobeniusError to_ref;
    double worst = 0;
    int64_t untouched = 0;
    for (int64_t t = 0; t < c_.tokens; ++t) {
      bool held = false;
      for (int64_t j = 0; j < c_.topk; ++j) held |= positions[size_t(t * c_.topk + j)] >= 0;
      const uint8_t* f = &fused[size_t(t * n * osize)];
      if (!held) {  // no entry on this rank: its row untouched
        ++untouched;
        if (const auto* p = std::find_if(f, f + n * osize, [](uint8_t b) { return b != 0xFF; }); p != f + n * osize) {
          FAIL_CHECK(name << ": token " << t << " has no entry on this rank but its output column " << (p - f) / osize
                          << " was written");
          return false;
        }
        continue;
      }
      if (std::memcmp(f, &chain[size_t(t * n * osize)], size_t(n * osize)) != 0) {
        int64_t col = 0;
        while (std::memcmp(f + col * osize, &chain[size_t((t * n + col) * osize)], size_t(osize)) == 0) ++col;
        FAIL_CHECK(name << ": token " << t << " column " << col << " = " << testutil::output_value(c_.out, f + col * osize)
                        << ", the unfused chain's "
                        << testutil::output_value(c_.out, &chain[size_t((t * n + col) * osize)]) << " (not the same bits)");
        return false;
      }
      for (int64_t col = 0; col < n; ++col) {
        double ref = 0, bound = std::ldexp(1.0, -140), terms = 0;
        for (int64_t j = 0; j < c_.topk; ++j) {
          const int32_t pos = positions[size_t(t * c_.topk + j)];
          if (pos < 0) continue;
          const int32_t e = group_of[size_t(pos)];
          double sum = 0, abs_sum = 0;
          for (int64_t kk = 0; kk < c_.k; ++kk) {
            const double a = c_.w4a4 ? kA4Scale * a4_.value(pos, kk) : nvfp4k::bf16_bits_to_float(a_[size_t(pos * c_.k + kk)]);
            const double p = a * w_.value(e * n + col, kk);
            sum += p, abs_sum += std::fabs(p);
          }
          const double w = weights_host_[size_t(t * c_.topk + j)], d64 = gw_ * sum;
          ref += w * d64;
          terms += std::fabs(w * d64);
          bound += std::fabs(w) * (relative_rounding(c_.d) * std::fabs(d64) + double(c_.k + 2) * std::ldexp(gw_ * abs_sum, -24));
        }
        bound += relative_rounding(c_.out) * std::fabs(ref) + double(c_.topk + 1) * std::ldexp(terms, -24);
        const double y = testutil::output_value(c_.out, f + col * osize);
        if (!(std::fabs(y - ref) <= bound)) {
          FAIL_CHECK(name << ": token " << t << " column " << col << " = " << y << ", float64 " << ref << " +- " << bound);
          return false;
        }
        to_ref.add(y, ref);
        worst = std::max(worst, std::fabs(y - ref) / bound);
      }
    }
    MESSAGE("moe_combine epilogue " << name << ": bit-identical to the chain; relative Frobenius error to float64 "
                                    << to_ref.relative() << ", worst element at " << worst << " of its bound; " << untouched
                                    << " tokens without an entry here left untouched");
    return true;
  }

  bool counters_zero() const {
    std::vector<int32_t> v(counters_.bytes() / 4);
    counters_.download(v.data(), v.size() * 4);
    return std::all_of(v.begin(), v.end(), [](int32_t x) { return x == 0; });
  }

  std::vector<uint8_t> fused_bits() const {
    std::vector<uint8_t> v(out_fused_.bytes());
    out_fused_.download(v.data(), v.size());
    return v;
  }

 private:
  CombineCase c_;
  int64_t entries_;
  testutil::HostNvfp4 w_;
  testutil::HostNvfp4 a4_;  // W4A4's A (global scale kA4Scale), else empty
  static constexpr float kA4Scale = 0.125f;
  std::vector<uint16_t> a_;
  std::vector<int32_t> ids_host_;
  std::vector<float> weights_host_;
  float gw_ = 1.0f;
  DeviceBuffer d_a_, d_a4_, d_a4s_, d_w_, d_s_, d_pre_, ids_, ends_, rows_, positions_, weights_;
  DeviceBuffer d_fused_, d_chain_, out_fused_, out_chain_, counters_;
};

void run_case(const CombineCase& c, std::mt19937& rng) {
  const std::string name = describe(c);
  CAPTURE(name);
  CombineFixture f(c, rng);
  f.draw(rng);
  f.run_chain();
  f.poison_fused();
  grouped_gemm(f.down(true), nullptr);
  check_cu(driver().cuCtxSynchronize(), "the fused down GEMM");
  if (!f.check(name)) return;
  if (c.caller_counters) CHECK_MESSAGE(f.counters_zero(), name << ": counters not zero after the call");
  const std::vector<uint8_t> first = f.fused_bits();
  f.poison_fused();
  grouped_gemm(f.down(true), nullptr);
  check_cu(driver().cuCtxSynchronize(), "the fused down GEMM, again");
  CHECK_MESSAGE(f.fused_bits() == first, name << ": a second run gave other bits");
  if (c.caller_counters) CHECK_MESSAGE(f.counters_zero(), name << ": counters not zero after the second call");
}

}  // namespace

TEST_SUITE("gpu_moe_combine_epilogue") {
  TEST_CASE("grouped_gemm with the MoE combine epilogue equals the chain bit for bit and float64 within its bound") {
    constexpr DType bf16 = DType::bf16, fp16 = DType::fp16, fp32 = DType::fp32;
    std::mt19937 rng(std::random_device{}());
    const CombineCase cases[] = {
        {1, 8, 16, 16},                                                  // decode: one token, top-8
        {1, 9, 257, 257, 0, 7168, 256},                                  // DeepSeek-V3's shape of n, 9 choices
        {37, 4, 32, 32, 0, 320, 512, 5},                                 // ragged tokens and n, padding ids
        {64, 1, 8, 8, 0, 256, 256},                                      // top-1
        {40, 8, 64, 16, 16, 512, 256, 7},                                // an EP rank: experts 16..31, padding
        {48, 8, 64, 64, 0, 384, 256, 0, true},                           // skewed: most experts empty
        {33, 4, 16, 16, 0, 192, 512, 0, false, false, fp32, fp16, bf16}, // ModelOpt layout, FP32 D, FP16 out, BF16 weights
        {20, 8, 32, 32, 0, 256, 256, 9, false, true, bf16, fp32, fp32, false},  // the library's counters, FP32 out
        {256, 8, 64, 64, 0, 1024, 256},                                  // taller tiles, a persistent grid
    };
    for (const CombineCase& c : cases) run_case(c, rng);
  }

  TEST_CASE("a captured routing and fused down GEMM replay with new ids: each replay equals the chain, counters reset") {
    std::mt19937 rng(std::random_device{}());
    const CombineCase c{24, 8, 32, 16, 8, 320, 256, 6};
    const std::string name = describe(c);
    CombineFixture f(c, rng);
    f.draw(rng);
    CUstream stream = nullptr;
    check_cu(driver().cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    // loaded before capture
    moe_route(f.route(), stream);
    grouped_gemm(f.down(true), stream);
    check_cu(driver().cuStreamSynchronize(stream), "warm-up");
    CUgraph graph = nullptr;
    CUgraphExec exec = nullptr;
    check_cu(driver().cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture");
    moe_route(f.route(), stream);
    grouped_gemm(f.down(true), stream);
    check_cu(driver().cuStreamEndCapture(stream, &graph), "cuStreamEndCapture");
    check_cu(driver().cuGraphInstantiateWithFlags(&exec, graph, 0), "cuGraphInstantiateWithFlags");
    for (int replay = 0; replay < 4; ++replay) {
      CAPTURE(replay);
      f.draw(rng);  // new ids and weights at the same addresses
      f.poison_fused();
      check_cu(driver().cuGraphLaunch(exec, stream), "cuGraphLaunch");
      check_cu(driver().cuStreamSynchronize(stream), "replay");
      CHECK_MESSAGE(f.counters_zero(), name << ": counters not zero after replay " << replay);
      const std::vector<uint8_t> replayed = f.fused_bits();
      f.run_chain();  // the chain on the same routing (routing again gives the same rows)
      if (!f.check(name + " replay " + std::to_string(replay))) break;
      CHECK(f.fused_bits() == replayed);
    }
    driver().cuGraphExecDestroy(exec);
    driver().cuGraphDestroy(graph);
    driver().cuStreamDestroy(stream);
  }
}

namespace {

// The Blackwell backends' cases: W4A4 on the weight as stored.
void run_blackwell_cases() {
  constexpr DType bf16 = DType::bf16, fp16 = DType::fp16, fp32 = DType::fp32;
  std::mt19937 rng(std::random_device{}());
  const CombineCase cases[] = {
      {1, 8, 16, 16, 0, 512, 256, 0, false, false, bf16, bf16, fp32, true, true},      // decode: one token, top-8
      {37, 4, 32, 32, 0, 320, 512, 5, false, false, bf16, bf16, fp32, true, true},     // ragged tokens and n, padding ids
      {40, 8, 64, 16, 16, 512, 256, 7, false, false, fp32, fp16, bf16, true, true},    // an EP rank, FP32 D, FP16 out
      {48, 8, 64, 64, 0, 384, 256, 0, true, false, bf16, fp32, fp32, false, true},     // skewed, the library's counters
      {256, 8, 64, 64, 0, 1024, 256, 0, false, false, bf16, bf16, fp32, true, true},   // tall tiles, many per CTA
  };
  for (const CombineCase& c : cases) run_case(c, rng);
}

}  // namespace

TEST_SUITE("gpu_moe_combine_epilogue_sm100") {
  TEST_CASE("sm_100a grouped_gemm with the MoE combine epilogue equals the chain bit for bit and float64 within its bound") {
    const test::OnSm100Backend on;
    if (on.ready()) run_blackwell_cases();
  }
}

TEST_SUITE("gpu_moe_combine_epilogue_sm120") {
  TEST_CASE("sm_120a grouped_gemm with the MoE combine epilogue equals the chain bit for bit and float64 within its bound") {
    const test::OnSm120Backend on;
    if (on.ready()) run_blackwell_cases();
  }
}
