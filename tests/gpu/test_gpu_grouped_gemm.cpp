// grouped_gemm on the GPU against a float64 reference per group: fresh random weights per
// group with per-group global scales 2^10 apart, random group sizes (empty, one-row, all rows
// in one group), outputs poisoned so every row of a group must be written and every other row
// left alone, both layouts, both scale layouts and prepacked weights, W4A16 and W4A4, routing
// changed between CUDA graph replays, group sizes out of range.
#include <doctest/doctest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <thread>

#include "../dequantize_fixture.hpp"
#include "gemm_output.hpp"
#include "common/nvfp4_format.cuh"
#include "core/gpu_util.hpp"
#include "ops/gemm/call.hpp"
#include "ops/gemm/dispatch.hpp"
#include "ops/gemm/sm90/backend.hpp"
#include "ops/gemm/sm90/tiles.hpp"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;

namespace {

struct GroupedCase {
  GroupedLayout layout = GroupedLayout::contiguous;
  int groups = 8;
  int64_t m = 64;  // contiguous: rows (an upper bound of the ends); masked: rows per group
  int64_t n = 200, k = 256;
  ScaleLayout scales = ScaleLayout::linear;
  DType a = DType::bf16, d = DType::fp32;
  bool prepacked = false;
  // ramp: group g holds 8 (g + 1) rows; uneven (contiguous): odd groups expected_m + 1 rows (a full
  // tile and a one-row tile), even ones 1
  enum Sizes { random, one_group, out_of_range, ramp, uneven } sizes = random;
  bool a_scale_per_group = false;  // W4A4: A's global scale one per group
  bool gather = false;             // contiguous: A's rows read through row_index from fewer token rows
  bool bad_indices = false;        // gathered: some routed rows' indices outside A (their D rows NaN)
  int64_t expected_m = 0;          // the tile's rows per group (0: grouped_gemm's default)
  bool workspace = false;          // grouped_gemm_workspace_bytes(args) given (poisoned), not allocated by the call
  int64_t d_pad = 0;               // D's rows this many elements longer than n (poisoned, never written)
  // the weights' packed values and scales written at the start of these buffers instead of fresh
  // ones (not prepacked): cases in turn put their weights at one address, as an allocator hands a
  // freed block out again
  DeviceBuffer* weight_values = nullptr;
  DeviceBuffer* weight_scales = nullptr;
};

// All groups' weights, one after the other, and what the kernels read of them.
struct GroupWeights {
  std::vector<testutil::HostNvfp4> w;
  std::vector<float> gscale;
  DeviceBuffer data, scales, gscales;
  void* data_at = nullptr;  // where the kernels read them: data and scales, or the case's buffers
  void* scales_at = nullptr;
  GroupWeights(const GroupedCase& c, std::mt19937& rng) {
    std::vector<uint8_t> packed, sc;
    for (int g = 0; g < c.groups; ++g) {
      w.emplace_back(c.n, c.k, c.scales, rng);
      packed.insert(packed.end(), w.back().packed.begin(), w.back().packed.end());
      sc.insert(sc.end(), w.back().scales.begin(), w.back().scales.end());
      gscale.push_back(std::ldexp(1.0f + (rng() % 100) / 100.0f, (g % 2 ? -14 : -4)));  // 2^10 apart
    }
    data = to_device(packed);
    scales = to_device(sc);
    gscales = to_device(gscale);
    if (c.prepacked) {  // each group's weight prepacked into its slot
      const int64_t bytes = prepacked_bytes(c.n, c.k), scale_bytes = int64_t(w[0].scales.size());
      DeviceBuffer pre(size_t(bytes * c.groups));
      for (int g = 0; g < c.groups; ++g) {
        PrepackArgs p;
        p.weight = {data.as<unsigned char>() + g * c.n * c.k / 2, 0, scales.as<unsigned char>() + g * scale_bytes, c.scales, {}};
        p.n = c.n, p.k = c.k, p.out = pre.as<unsigned char>() + g * bytes;
        prepack(p, nullptr);
      }
      data = std::move(pre);
    }
    data_at = data.get(), scales_at = scales.get();
    if (c.weight_values) {
      REQUIRE(!c.prepacked);
      REQUIRE(c.weight_values->bytes() >= packed.size());
      REQUIRE(c.weight_scales->bytes() >= sc.size());
      c.weight_values->upload(packed.data(), packed.size());
      c.weight_scales->upload(sc.data(), sc.size());
      data_at = c.weight_values->get(), scales_at = c.weight_scales->get();
    }
  }
};

// Each group's rows [begin, end) of A and D.
std::vector<std::pair<int64_t, int64_t>> draw_groups(const GroupedCase& c, std::mt19937& rng, std::vector<int32_t>& sizes) {
  std::vector<std::pair<int64_t, int64_t>> rows(size_t(c.groups));
  sizes.assign(size_t(c.groups), 0);
  if (c.layout == GroupedLayout::masked) {
    for (int g = 0; g < c.groups; ++g) {
      int64_t r = c.sizes == GroupedCase::ramp ? std::min<int64_t>(8 * (g + 1), c.m)
                  : g % 4 == 0                 ? 0
                  : g % 4 == 1                 ? 1
                  : g % 4 == 2                 ? c.m
                                               : int64_t(rng() % uint64_t(c.m));
      sizes[size_t(g)] = int32_t(r);
      if (c.sizes == GroupedCase::out_of_range && g % 3 == 0) sizes[size_t(g)] = g % 2 ? -5 : int32_t(c.m + 7);  // clamped
      r = std::clamp<int64_t>(sizes[size_t(g)], 0, c.m);
      rows[size_t(g)] = {g * c.m, g * c.m + r};
    }
    return rows;
  }
  // contiguous: cumulative ends up to about 3/4 of m, empty and one-row groups among them
  int64_t end = 0;
  for (int g = 0; g < c.groups; ++g) {
    int64_t r = c.sizes == GroupedCase::one_group ? (g == c.groups / 2 ? c.m : 0)
                : c.sizes == GroupedCase::ramp    ? 8 * (g + 1)
                : c.sizes == GroupedCase::uneven  ? (g % 2 ? c.expected_m + 1 : 1)
                : g % 5 == 0                      ? 0
                : g % 5 == 1                      ? 1
                                                  : int64_t(rng() % uint64_t(3 * c.m / (2 * c.groups) + 1));
    r = std::min(r, c.m - end);
    const int64_t begin = end;
    end += r;
    sizes[size_t(g)] = int32_t(end);
    if (c.sizes == GroupedCase::out_of_range && g == 1) sizes[size_t(g)] = -3;  // below the previous end: empty
    if (c.sizes == GroupedCase::out_of_range && g == c.groups - 1) sizes[size_t(g)] = int32_t(c.m + 100);  // past m: m
    const int64_t e = std::clamp<int64_t>(sizes[size_t(g)], begin, c.m);
    rows[size_t(g)] = {begin, e};
    end = e;
  }
  return rows;
}

// Runs grouped_gemm on its own stream into a poisoned D (0xFF bytes: NaN in every output type)
// and returns D's bytes: directly, or (captured) by replaying a graph captured on the first run
// (the kernels loaded before the capture), so later runs see only what the device holds.
class GroupedRunner {
 public:
  explicit GroupedRunner(bool captured) : captured_(captured) {
    check_cu(driver().cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  }
  ~GroupedRunner() {
    const Driver& drv = driver();
    if (exec_) drv.cuGraphExecDestroy(exec_);
    if (graph_) drv.cuGraphDestroy(graph_);
    drv.cuStreamDestroy(stream_);
  }
  GroupedRunner(const GroupedRunner&) = delete;
  GroupedRunner& operator=(const GroupedRunner&) = delete;

  std::vector<uint8_t> run(const GroupedGemmArgs& g, DeviceBuffer& d_out) {
    const Driver& drv = driver();
    d_out.fill(0xFF);
    if (!captured_) {
      grouped_gemm(g, stream_);
    } else {
      if (!exec_) {
        grouped_gemm(g, stream_);  // loads the kernels outside the capture
        check_cu(drv.cuStreamSynchronize(stream_), "warm-up");
        d_out.fill(0xFF);
        check_cu(drv.cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture");
        grouped_gemm(g, stream_);
        check_cu(drv.cuStreamEndCapture(stream_, &graph_), "cuStreamEndCapture");
        check_cu(drv.cuGraphInstantiateWithFlags(&exec_, graph_, 0), "cuGraphInstantiate");
      }
      check_cu(drv.cuGraphLaunch(exec_, stream_), "cuGraphLaunch");
    }
    check_cu(drv.cuStreamSynchronize(stream_), "grouped_gemm");
    std::vector<uint8_t> got(d_out.bytes());
    d_out.download(got.data(), got.size());
    return got;
  }

 private:
  bool captured_;
  CUstream stream_ = nullptr;
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
};

// Runs `c` and checks every row of D: a group's against float64, the others still poisoned.
// `replays` > 0: captures the call into a CUDA graph and replays it with routing redrawn.
void run_grouped(const GroupedCase& c, std::mt19937& rng, int replays = 0) {
  CAPTURE(int(c.layout));
  CAPTURE(c.groups);
  CAPTURE(c.m);
  CAPTURE(c.n);
  CAPTURE(c.k);
  const GroupWeights weights(c, rng);
  const int64_t rows = c.layout == GroupedLayout::masked ? c.m * c.groups : c.m;
  const bool w4a4 = c.a == DType::nvfp4;
  const int64_t a_rows = c.gather ? rows / 2 + 3 : rows;  // the tokens: fewer than the rows routed from them
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> a(size_t(rows * c.k));
  std::vector<double> ad(size_t(a_rows * c.k));
  testutil::HostNvfp4 a4(w4a4 ? a_rows : 0, c.k, ScaleLayout::linear, rng);
  const float ga = 0.375f;
  for (int64_t r = 0; r < a_rows; ++r)
    for (int64_t k = 0; k < c.k; ++k) {
      if (w4a4) {
        ad[size_t(r * c.k + k)] = a4.value(r, k) * ga;
        continue;
      }
      const DType t = c.a;
      a[size_t(r * c.k + k)] = t == DType::bf16 ? nvfp4k::float_to_bf16_bits(normal(rng)) : nvfp4k::float_to_fp16_bits(normal(rng));
      ad[size_t(r * c.k + k)] = testutil::half_bits_to_double(t, a[size_t(r * c.k + k)]);
    }
  const int esize = c.d == DType::fp32 ? 4 : 2;
  DeviceBuffer d_a = to_device(a), d_a4 = to_device(a4.packed), d_a4s = to_device(a4.scales);
  const int64_t d_row = c.n + c.d_pad;
  DeviceBuffer d_out(size_t(rows * d_row * esize)), d_sizes(size_t(c.groups) * 4), d_row_index(size_t(rows) * 4);

  GroupedGemmArgs g;
  g.groups = c.groups;
  g.layout = c.layout;
  g.gemm.m = c.m, g.gemm.n = c.n, g.gemm.k = c.k;
  g.gemm.a = w4a4 ? nullptr : d_a.get();
  g.gemm.a_dtype = c.a;
  g.expected_m = c.expected_m;
  // per group: ga times 1/2, 1 or 2 (a_scale_factor), exact in the reference
  std::vector<float> ga_group(size_t(c.groups));
  for (int gi = 0; gi < c.groups; ++gi) ga_group[size_t(gi)] = ga * std::ldexp(1.0f, gi % 3 - 1);
  DeviceBuffer d_ga_group = to_device(ga_group);
  auto a_scale_factor = [&](int gi) { return c.a_scale_per_group ? double(ga_group[size_t(gi)]) / ga : 1.0; };
  if (w4a4) g.gemm.a_fp4 = {d_a4.get(), 0, d_a4s.get(), ScaleLayout::linear, {ga, nullptr, false}};
  if (c.gather) g.row_index = d_row_index.as<int32_t>(), g.a_rows = a_rows;
  if (c.a_scale_per_group) {
    g.gemm.a_fp4.global_scale = {1.0f, d_ga_group.as<float>(), false};
    g.a_global_scale_per_group = true;
  }
  g.gemm.b = {weights.data_at, 0, weights.scales_at, c.scales, {1.0f, weights.gscales.as<float>(), true}};
  g.gemm.b_prepacked = c.prepacked;
  g.gemm.d = d_out.get(), g.gemm.d_dtype = c.d, g.gemm.d_row_stride = c.d_pad ? d_row : 0;
  (c.layout == GroupedLayout::masked ? g.masked_m : g.group_ends) = d_sizes.as<int32_t>();
  DeviceBuffer d_workspace;
  if (c.workspace) {
    const int64_t bytes = grouped_gemm_workspace_bytes(g);
    REQUIRE(bytes > 0);
    d_workspace = DeviceBuffer(size_t(bytes));
    d_workspace.fill(0x7F);
    g.gemm.workspace = d_workspace.get(), g.gemm.workspace_bytes = bytes;
  }

  // each group's weight decoded once (E2M1 x E4M3 products are exact in float)
  std::vector<std::vector<float>> decoded(size_t(c.groups));
  testutil::on_all_cores([&](unsigned t, unsigned threads) {
    for (int gi = int(t); gi < c.groups; gi += int(threads)) {
      std::vector<float>& d = decoded[size_t(gi)];
      d.resize(size_t(c.n * c.k));
      for (int64_t n = 0; n < c.n; ++n)
        for (int64_t k = 0; k < c.k; ++k) d[size_t(n * c.k + k)] = float(weights.w[size_t(gi)].value(n, k));
    }
  });
  GroupedRunner runner(replays > 0);
  for (int round = 0; round <= replays; ++round) {
    std::vector<int32_t> sizes;
    const auto group_rows = draw_groups(c, rng, sizes);
    d_sizes.upload(sizes.data(), sizes.size() * 4);
    // gathered: each routed row reads a random token, the rows after them -1 (as moe_route leaves them)
    std::vector<int32_t> row_index(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r)
      row_index[size_t(r)] = !c.gather ? int32_t(r) : r < group_rows.back().second ? int32_t(rng() % uint64_t(a_rows)) : -1;
    if (c.bad_indices)
      for (int64_t r = 3; r < group_rows.back().second; r += 7) row_index[size_t(r)] = r % 2 ? int32_t(a_rows + r) : -5;
    d_row_index.upload(row_index.data(), row_index.size() * 4);
    const std::vector<uint8_t> got = runner.run(g, d_out);

    std::vector<int> group_of(size_t(rows), -1);
    for (int gi = 0; gi < c.groups; ++gi)
      for (int64_t r = group_rows[size_t(gi)].first; r < group_rows[size_t(gi)].second; ++r) group_of[size_t(r)] = gi;
    // The rows checked over all cores; each thread stops at its first wrong element, and the
    // lowest of those rows is the first wrong one.
    struct Verdict {
      double err2 = 0, ref2 = 0;
      int64_t row = INT64_MAX;  // the first wrong row; none yet
      std::string what;
    };
    std::vector<Verdict> verdicts(std::max(1u, std::thread::hardware_concurrency()));
    testutil::on_all_cores([&](unsigned t, unsigned threads) {
      Verdict& v = verdicts[t];
      auto wrong = [&](int64_t r, std::string what) {
        v.row = r;
        v.what = "round " + std::to_string(round) + ": " + what;
      };
      for (int64_t r = t; r < rows && v.row == INT64_MAX; r += threads)
        for (int64_t n = 0; n < d_row; ++n) {
          const size_t at = size_t(r * d_row + n) * esize;
          auto element = [&] { return "element (" + std::to_string(r) + ", " + std::to_string(n) + ")"; };
          const int gi = group_of[size_t(r)];
          if (gi < 0 || n >= c.n) {
            if (!std::all_of(&got[at], &got[at] + esize, [](uint8_t b) { return b == 0xFF; })) {
              wrong(r, gi < 0 ? "row " + std::to_string(r) + " belongs to no group but " + element() + " was written"
                              : element() + " lies in D's row padding but was written");
              break;
            }
            continue;
          }
          const double got_v = testutil::output_value(c.d, &got[at]);
          const int64_t src = row_index[size_t(r)];
          if (src < 0 || src >= a_rows) {  // an index outside A: the row is NaN, nothing else is read
            if (!std::isnan(got_v)) {
              wrong(r, "row " + std::to_string(r) + " has index " + std::to_string(src) + " outside A's " +
                           std::to_string(a_rows) + " rows, but " + element() + " = " + std::to_string(got_v) + ", expected NaN");
              break;
            }
            continue;
          }
          const float* wr = &decoded[size_t(gi)][size_t(n * c.k)];
          double s = 0;
          for (int64_t k = 0; k < c.k; ++k) s += ad[size_t(src * c.k + k)] * wr[k];
          const double ref = s * weights.gscale[size_t(gi)] * a_scale_factor(gi);
          if (!std::isfinite(got_v)) {
            wrong(r, "group " + std::to_string(gi) + ", first unwritten or non-finite " + element() + " = " +
                         std::to_string(got_v) + ", expected " + std::to_string(ref));
            break;
          }
          v.err2 += (got_v - ref) * (got_v - ref);
          v.ref2 += ref * ref;
        }
    });
    double err2 = 0, ref2 = 0;
    const Verdict* first = nullptr;
    for (const Verdict& v : verdicts) {
      err2 += v.err2, ref2 += v.ref2;
      if (v.row != INT64_MAX && (!first || v.row < first->row)) first = &v;
    }
    if (first) {
      FAIL_CHECK(first->what);
      break;
    }
    const double rel = std::sqrt(err2 / std::max(ref2, 1e-300));
    const double bound = c.d == DType::fp32 ? 1e-5 : c.d == DType::bf16 ? 4e-3 : 1e-3;
    MESSAGE("grouped layout=" << int(c.layout) << " G=" << c.groups << " m=" << c.m << " n=" << c.n << " k=" << c.k
                              << " prepacked=" << c.prepacked << " a=" << int(c.a) << " a_scale_per_group=" << c.a_scale_per_group << " round " << round
                              << ": relative error " << rel);
    CHECK(rel < bound);
  }
}

// The batched layout: every row t of A goes to every group g, A [T, G, K] or [G, T, K] with
// padded strides, D likewise; D's padding and every element is poisoned first, so a stray or
// missing write shows. W4A4: A is [T * G] NVFP4 rows, its global scale one, per group or per row.
struct BatchedCase {
  int groups = 8;
  int64_t t = 16, n = 200, k = 256;
  bool groups_outer = false;  // [G, T, K] / [G, T, N] instead of [T, G, K] / [T, G, N]
  int64_t pad = 0;            // elements after each row (a multiple of 8)
  ScaleLayout scales = ScaleLayout::linear;
  DType a = DType::bf16, d = DType::fp32;
  bool prepacked = false;
  enum AScale { one, per_group, per_row } a_scale = one;  // W4A4
};

void run_batched(const BatchedCase& c, std::mt19937& rng, int replays = 0) {
  CAPTURE(c.groups);
  CAPTURE(c.t);
  CAPTURE(c.n);
  CAPTURE(c.k);
  CAPTURE(c.groups_outer);
  CAPTURE(c.pad);
  GroupedCase wc;
  wc.groups = c.groups, wc.n = c.n, wc.k = c.k, wc.scales = c.scales, wc.prepacked = c.prepacked;
  const GroupWeights weights(wc, rng);
  const bool w4a4 = c.a == DType::nvfp4;
  const int64_t G = c.groups, rows = c.t * G;
  // element (t, g, 0) of A (BF16/FP16) and D at these offsets
  const int64_t a_row = c.groups_outer ? c.k + c.pad : G * (c.k + c.pad), a_grp = c.groups_outer ? c.t * a_row : c.k + c.pad;
  const int64_t d_row = c.groups_outer ? c.n + c.pad : G * (c.n + c.pad), d_grp = c.groups_outer ? c.t * d_row : c.n + c.pad;
  const int64_t a_elems = std::max(c.t * a_row, G * a_grp), d_elems = std::max(c.t * d_row, G * d_grp);
  const int esize = c.d == DType::fp32 ? 4 : 2;
  std::vector<float> ga_row(static_cast<size_t>(rows)), ga_group(static_cast<size_t>(G));
  for (int64_t r = 0; r < rows; ++r) ga_row[size_t(r)] = std::ldexp(1.0f, int(r % 5) - 2);
  for (int64_t g = 0; g < G; ++g) ga_group[size_t(g)] = std::ldexp(0.75f, int(g % 3) - 1);
  DeviceBuffer d_out(size_t(d_elems * esize)), d_ga_row = to_device(ga_row), d_ga_group = to_device(ga_group);
  const float ga = 0.375f;

  GroupedGemmArgs g;
  g.groups = c.groups;
  g.layout = GroupedLayout::batched;
  g.gemm.m = c.t, g.gemm.n = c.n, g.gemm.k = c.k;
  g.gemm.a_dtype = c.a;
  if (!w4a4) g.gemm.a_row_stride = a_row, g.a_group_stride = a_grp;
  g.gemm.d_row_stride = d_row, g.d_group_stride = d_grp;
  g.gemm.b = {weights.data_at, 0, weights.scales_at, c.scales, {1.0f, weights.gscales.as<float>(), true}};
  g.gemm.b_prepacked = c.prepacked;
  g.gemm.d = d_out.get(), g.gemm.d_dtype = c.d;
  auto a_factor = [&](int64_t t, int64_t gi) {
    return !w4a4                                ? 1.0
           : c.a_scale == BatchedCase::one       ? double(ga)
           : c.a_scale == BatchedCase::per_group ? double(ga_group[size_t(gi)])
                                                 : double(ga_row[size_t(t * G + gi)]);
  };

  GroupedRunner runner(replays > 0);
  DeviceBuffer d_a(size_t(a_elems * 2)), d_a4(size_t(rows * c.k / 2)), d_a4s(size_t(rows * c.k / 16));
  for (int round = 0; round <= replays; ++round) {
    // fresh activations every round (a replay reads the new ones)
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<uint16_t> a(size_t(a_elems), 0xFFFF);  // padding NaN: never read
    std::vector<double> ad(size_t(rows * c.k));       // [t * G + g, k]
    testutil::HostNvfp4 a4(w4a4 ? rows : 0, c.k, ScaleLayout::linear, rng);
    for (int64_t t = 0; t < c.t; ++t)
      for (int64_t gi = 0; gi < G; ++gi)
        for (int64_t k = 0; k < c.k; ++k) {
          const size_t at = size_t((t * G + gi) * c.k + k);
          if (w4a4) {
            ad[at] = a4.value(t * G + gi, k);
            continue;
          }
          const uint16_t bits =
              c.a == DType::bf16 ? nvfp4k::float_to_bf16_bits(normal(rng)) : nvfp4k::float_to_fp16_bits(normal(rng));
          a[size_t(t * a_row + gi * a_grp + k)] = bits;
          ad[at] = testutil::half_bits_to_double(c.a, bits);
        }
    d_a.upload(a.data(), a.size() * 2);
    if (w4a4) {
      d_a4.upload(a4.packed.data(), a4.packed.size());
      d_a4s.upload(a4.scales.data(), a4.scales.size());
      g.gemm.a_fp4 = {d_a4.get(), 0, d_a4s.get(), ScaleLayout::linear, {ga, nullptr, false}};
      if (c.a_scale == BatchedCase::per_group) {
        g.gemm.a_fp4.global_scale = {1.0f, d_ga_group.as<float>(), false};
        g.a_global_scale_per_group = true;
      } else if (c.a_scale == BatchedCase::per_row) {
        g.gemm.a_fp4.global_scale = {1.0f, d_ga_row.as<float>(), true};
      }
    } else {
      g.gemm.a = d_a.get();
    }
    const std::vector<uint8_t> got = runner.run(g, d_out);
    std::vector<bool> owned(size_t(d_elems), false);
    double err2 = 0, ref2 = 0;
    bool ok = true;
    for (int64_t t = 0; t < c.t && ok; ++t)
      for (int64_t gi = 0; gi < G && ok; ++gi)
        for (int64_t n = 0; n < c.n; ++n) {
          const int64_t e = t * d_row + gi * d_grp + n;
          owned[size_t(e)] = true;
          const double v = testutil::output_value(c.d, &got[size_t(e * esize)]);
          const testutil::HostNvfp4& w = weights.w[size_t(gi)];
          double s = 0;
          for (int64_t k = 0; k < c.k; ++k) s += ad[size_t((t * G + gi) * c.k + k)] * w.value(n, k);
          const double ref = s * weights.gscale[size_t(gi)] * a_factor(t, gi);
          if (!std::isfinite(v)) {
            FAIL_CHECK("round " << round << ": first unwritten or non-finite element (t " << t << ", group " << gi << ", n "
                                << n << ") = " << v << ", expected " << ref);
            ok = false;
            break;
          }
          err2 += (v - ref) * (v - ref);
          ref2 += ref * ref;
        }
    for (int64_t e = 0; e < d_elems && ok; ++e)
      if (!owned[size_t(e)] &&
          !std::all_of(&got[size_t(e * esize)], &got[size_t(e * esize)] + esize, [](uint8_t b) { return b == 0xFF; })) {
        FAIL_CHECK("round " << round << ": D's padding element " << e << " (no (t, group, n) of D) was written");
        ok = false;
      }
    if (!ok) break;
    const double rel = std::sqrt(err2 / std::max(ref2, 1e-300));
    const double bound = c.d == DType::fp32 ? 1e-5 : c.d == DType::bf16 ? 4e-3 : 1e-3;
    MESSAGE("batched G=" << c.groups << " T=" << c.t << " n=" << c.n << " k=" << c.k << " groups_outer=" << c.groups_outer
                         << " pad=" << c.pad << " a=" << int(c.a) << " a_scale=" << int(c.a_scale) << " round " << round
                         << ": relative error " << rel);
    CHECK(rel < bound);
  }
}

}  // namespace

TEST_SUITE("gpu_grouped_gemm") {
  TEST_CASE("contiguous groups against a float64 reference: empty, one-row and full groups, per-group scales") {
    std::mt19937 rng(std::random_device{}());
    run_grouped({GroupedLayout::contiguous, 8, 64, 200, 256}, rng);
    run_grouped({GroupedLayout::contiguous, 128, 300, 256, 512, ScaleLayout::swizzled128x4, DType::bf16, DType::bf16}, rng);
    run_grouped({GroupedLayout::contiguous, 16, 700, 136, 320, ScaleLayout::linear, DType::fp16, DType::fp16, false,
                 GroupedCase::one_group},
                rng);
    run_grouped({GroupedLayout::contiguous, 256, 16, 128, 256}, rng);  // decode: more groups than rows
  }

  // An expert's descriptor is reused while the weights' address and shape are the same, and
  // encoded again for any other shape there: one kept by address alone would read the first
  // case's weights (fewer experts' rows, other rows per expert, another row stride).
  TEST_CASE("grouped gemm on weights freed and allocated again at one address: each call reads its own experts") {
    std::mt19937 rng(std::random_device{}());
    DeviceBuffer values(size_t(16) * 512 * 1024 / 2), scales(size_t(16) * 512 * 1024 / 16 + 4096);
    GroupedCase cases[] = {
        {GroupedLayout::contiguous, 8, 64, 256, 512},
        {GroupedLayout::contiguous, 16, 64, 256, 512},   // more experts at the same address
        {GroupedLayout::contiguous, 8, 64, 512, 512},    // more rows per expert
        {GroupedLayout::contiguous, 8, 64, 256, 1024},   // longer rows: another row stride
        {GroupedLayout::contiguous, 8, 64, 256, 512},    // the first shape, new contents: the descriptor reused
        {GroupedLayout::masked, 8, 32, 256, 512},        // another layout over the same weights' shape
        {GroupedLayout::contiguous, 8, 64, 256, 512, ScaleLayout::linear, DType::nvfp4},  // W4A4
    };
    for (GroupedCase& c : cases) {
      c.weight_values = &values;
      c.weight_scales = &scales;
      run_grouped(c, rng);
    }
  }

  TEST_CASE("tall tiles narrow their MMA to a group's rows: every width of the tile, against float64") {
    std::mt19937 rng(std::random_device{}());
    SUBCASE("contiguous and masked groups of 0, 1 and up to 281 rows") {
      GroupedCase c{GroupedLayout::contiguous, 8, 1500, 200, 256};
      c.expected_m = 256;
      run_grouped(c, rng);
      c.prepacked = true, c.d = DType::bf16;
      run_grouped(c, rng);
      GroupedCase masked{GroupedLayout::masked, 8, 150, 136, 512, ScaleLayout::swizzled128x4};  // 160-row tiles
      masked.expected_m = 150;
      run_grouped(masked, rng);
    }
    // groups of 8, 16, ... rows: every width of 160- and 192-row tiles (eighths above the half),
    // each at its narrowest and widest rows; N wide enough that the groups' tiles fill the grid
    SUBCASE("a ramp of group sizes") {
      for (int64_t tile : {160, 192})
        for (bool prepacked : {false, true}) {
          CAPTURE(tile);
          CAPTURE(prepacked);
          GroupedCase ramp{GroupedLayout::masked, int(tile / 8), tile, 2600, 256, ScaleLayout::linear, DType::bf16, DType::bf16, prepacked};
          ramp.sizes = GroupedCase::ramp, ramp.expected_m = tile;
          run_grouped(ramp, rng);
          ramp.layout = GroupedLayout::contiguous, ramp.m = 4 * (tile / 8) * (tile / 8 + 1);
          run_grouped(ramp, rng);
        }
    }
    SUBCASE("groups one row past a tile (a full tile, then a one-row tile) between one-row groups") {
      for (bool prepacked : {false, true}) {
        CAPTURE(prepacked);
        GroupedCase uneven{GroupedLayout::contiguous, 24, 12 * 162, 2600, 512, ScaleLayout::swizzled128x4, DType::bf16, DType::bf16, prepacked};
        uneven.sizes = GroupedCase::uneven, uneven.expected_m = 160;
        run_grouped(uneven, rng);
        run_grouped(uneven, rng, 1);  // and replayed in a graph
      }
    }
  }

  TEST_CASE("persistent grids: each CTA runs many tiles, the stages' ring wrapping from tile to tile") {
    std::mt19937 rng(std::random_device{}());
    // tiles of up to 64 rows: about 10 tiles of 4-5 k-tiles a CTA (132 SMs), ModelOpt and prepacked
    // weights, contiguous (sorted and gathered rows) and masked groups
    run_grouped({GroupedLayout::contiguous, 64, 1024, 1024, 1024}, rng);
    run_grouped({GroupedLayout::contiguous, 64, 1024, 1000, 1088, ScaleLayout::swizzled128x4, DType::fp16, DType::bf16, true}, rng);
    GroupedCase gathered{GroupedLayout::contiguous, 48, 768, 1024, 1024, ScaleLayout::linear, DType::bf16, DType::bf16, true};
    gathered.gather = true;
    run_grouped(gathered, rng, 1);  // captured, routing and row order redrawn
    run_grouped({GroupedLayout::masked, 24, 48, 1024, 1024, ScaleLayout::swizzled128x4, DType::bf16, DType::fp32}, rng, 1);
    // rows reaching many groups of a wide weight: the decode tile of three consumers at two CTAs
    // an SM (128 groups x 15 tiles of 192 rows fill 132 SMs' two CTAs six times), 4 rows a group
    {
      GemmSpec problem = gemm_problem(Arch::sm_90a, 2880, 512, DType::bf16, DType::bf16, ScaleLayout::linear, true, kNoDType);
      problem.groups = 128, problem.flags |= kFlagGroupedContiguous;
      const int sms = current_device().sm_count;
      const GemmTile tile = sm90::heuristic(problem, 5, sms, 128);
      MESSAGE("128 groups of 2880 x 512, 512 rows on " << sms << " SMs: " << sm90::describe(sm90::from_config(tile)));
      if (128 * 15 >= 12 * sms) CHECK(sm90::from_config(tile).consumers == 3);
      run_grouped({GroupedLayout::contiguous, 128, 512, 2880, 512, ScaleLayout::linear, DType::bf16, DType::bf16, true}, rng);
      run_grouped({GroupedLayout::contiguous, 128, 512, 2880, 512, ScaleLayout::linear, DType::fp16, DType::fp32, true}, rng, 1);
    }
    // one token's 9 rows reaching 9 of 16 experts of K past 4096 (DeepSeek-V3's gate_up with the
    // shared one): two consumers' 9 x 32 tiles of 128 rows would take a second round of two CTAs
    // an SM, three consumers' 9 x 22 of 192 rows take one
    {
      GemmSpec problem = gemm_problem(Arch::sm_90a, 4096, 4608, DType::bf16, DType::bf16, ScaleLayout::linear, true, kNoDType);
      problem.groups = 16, problem.flags |= kFlagGroupedContiguous;
      const int sms = current_device().sm_count;
      const GemmTile tile = sm90::heuristic(problem, 1, sms, 9);
      MESSAGE("16 groups of 4096 x 4608, 9 rows on " << sms << " SMs: " << sm90::describe(sm90::from_config(tile)));
      if (16 * 22 >= 2 * sms && 9 * 32 > 2 * sms && 9 * 22 <= 2 * sms) CHECK(sm90::from_config(tile).consumers == 3);
      run_grouped({GroupedLayout::contiguous, 16, 9, 4096, 4608, ScaleLayout::linear, DType::bf16, DType::bf16, true}, rng);
    }
    // more groups than a cursor's first walk loads at once (256): it walks them chunk by chunk
    run_grouped({GroupedLayout::contiguous, 1100, 700, 128, 256, ScaleLayout::linear, DType::bf16, DType::bf16, true}, rng);
    run_grouped({GroupedLayout::masked, 1030, 4, 128, 256, ScaleLayout::linear, DType::bf16, DType::bf16}, rng);
  }

  TEST_CASE("the widest grouped tiles (17-192 rows per group, groups filling the grid) against float64") {
    std::mt19937 rng(std::random_device{}());
    // 128 groups of 400 weight rows: three consumer warpgroups on a prepacked weight, two with
    // two k slices (up to 64 rows) on ModelOpt's; a persistent grid up to 64 rows, then a CTA a
    // tile. Groups of 0 to 3 expected_m rows: empty, full and partial tiles.
    for (int64_t expected_m : {32, 64, 128})
      for (bool prepacked : {false, true}) {
        CAPTURE(expected_m);
        CAPTURE(prepacked);
        GroupedCase c{GroupedLayout::contiguous, 128, 128 * 2 * expected_m, 400, 512, ScaleLayout::linear, DType::bf16, DType::bf16, prepacked};
        c.expected_m = expected_m;
        c.gather = expected_m == 64;
        run_grouped(c, rng);
      }
    // past 128 rows: one tile of 160 rows an expert (expected_m 160), of 192 (192), two of 160
    // (320), three of 176 (512); 96 groups of 0 to 300 rows, so full, narrowed and later tiles
    for (int64_t expected_m : {160, 192, 320, 512})
      for (bool prepacked : {false, true}) {
        CAPTURE(expected_m);
        CAPTURE(prepacked);
        GroupedCase c{GroupedLayout::contiguous, 96, 96 * 200, 560, 512, ScaleLayout::swizzled128x4, DType::bf16, DType::bf16, prepacked};
        c.expected_m = expected_m;
        run_grouped(c, rng);
      }
    // a tall tile holding fewer rows than its box copies them out from shared memory, 16 bytes a
    // thread, and a full one stores through TMA: D's rows padded, N a whole number of 16-byte
    // pieces (then ragged: element by element), BF16 and FP32, contiguous and masked
    for (DType d : {DType::bf16, DType::fp32})
      for (GroupedLayout layout : {GroupedLayout::contiguous, GroupedLayout::masked})
        for (bool ragged : {false, true}) {
          CAPTURE(int(d));
          CAPTURE(int(layout));
          CAPTURE(ragged);
          const bool contiguous = layout == GroupedLayout::contiguous;
          GroupedCase c{layout, 24, contiguous ? 24 * 150 : 200, (d == DType::bf16 ? 296 : 300) + (ragged ? 2 : 0), 512,
                        ScaleLayout::linear, DType::bf16, d, contiguous};
          c.d_pad = (d == DType::bf16 ? 8 : 4) - (ragged ? 2 : 0);
          c.expected_m = contiguous ? 160 : 192;
          run_grouped(c, rng);
        }
    GroupedCase masked{GroupedLayout::masked, 128, 24, 1000, 512, ScaleLayout::swizzled128x4, DType::bf16, DType::fp32, true};
    masked.expected_m = 32;
    run_grouped(masked, rng, 1);  // captured, the groups' rows redrawn
  }

  TEST_CASE("grouped small shapes for the sanitizers: persistent CTAs whose ring wraps, one-row tiles, rows gathered, rows copied out") {
    std::mt19937 rng(std::random_device{}());
    run_grouped({GroupedLayout::contiguous, 128, 1024, 256, 1024, ScaleLayout::linear, DType::bf16, DType::bf16, true}, rng);
    GroupedCase tall{GroupedLayout::contiguous, 12, 1200, 256, 512, ScaleLayout::linear, DType::bf16, DType::bf16, true};
    tall.expected_m = 160;  // tiles taller than most groups: their rows copied out of shared memory
    tall.d_pad = 8;
    run_grouped(tall, rng);
    // groups one row past a tile: a one-row tile's row copied out
    GroupedCase uneven{GroupedLayout::contiguous, 12, 6 * 162, 4224, 256, ScaleLayout::linear, DType::bf16, DType::bf16, true};
    uneven.sizes = GroupedCase::uneven, uneven.expected_m = 160;
    run_grouped(uneven, rng);
    run_grouped({GroupedLayout::masked, 48, 16, 512, 1024, ScaleLayout::swizzled128x4, DType::bf16, DType::fp32}, rng);
    GroupedCase gathered{GroupedLayout::contiguous, 32, 256, 1024, 1024, ScaleLayout::linear, DType::bf16, DType::bf16};
    gathered.gather = true;
    run_grouped(gathered, rng);
    // the decode tile of three consumers at two CTAs an SM (rows reaching 128 groups of 2880)
    run_grouped({GroupedLayout::contiguous, 128, 512, 2880, 256, ScaleLayout::linear, DType::bf16, DType::bf16, true}, rng);
  }

  TEST_CASE("masked groups, prepacked weights and W4A4 against a float64 reference") {
    std::mt19937 rng(std::random_device{}());
    run_grouped({GroupedLayout::masked, 4, 40, 200, 256}, rng);
    run_grouped({GroupedLayout::masked, 8, 130, 384, 1024, ScaleLayout::swizzled128x4, DType::bf16, DType::bf16, true}, rng);
    run_grouped({GroupedLayout::contiguous, 8, 96, 256, 512, ScaleLayout::linear, DType::bf16, DType::fp32, true}, rng);
    run_grouped({GroupedLayout::contiguous, 8, 96, 200, 256, ScaleLayout::linear, DType::nvfp4, DType::fp32}, rng);
  }

  TEST_CASE("W4A4 with A's global scale per group (per-expert input_scale), both layouts") {
    std::mt19937 rng(std::random_device{}());
    GroupedCase c{GroupedLayout::contiguous, 12, 200, 256, 512, ScaleLayout::swizzled128x4, DType::nvfp4, DType::bf16};
    c.a_scale_per_group = true;
    run_grouped(c, rng);
    c = {GroupedLayout::masked, 5, 48, 136, 256, ScaleLayout::linear, DType::nvfp4, DType::fp32, true};
    c.a_scale_per_group = true;
    run_grouped(c, rng);
  }

  TEST_CASE("contiguous W4A4 reads A's rows through row_index (tokens unsorted), one and per-group A scales") {
    std::mt19937 rng(std::random_device{}());
    GroupedCase c{GroupedLayout::contiguous, 8, 96, 200, 256, ScaleLayout::linear, DType::nvfp4, DType::fp32};
    c.gather = true;
    run_grouped(c, rng);
    c = {GroupedLayout::contiguous, 64, 300, 256, 512, ScaleLayout::swizzled128x4, DType::nvfp4, DType::bf16, true};
    c.gather = true, c.a_scale_per_group = true;
    run_grouped(c, rng, 2);  // captured, routing and row order redrawn between replays
  }

  TEST_CASE("contiguous W4A16 reads A's rows through row_index, copied first in sorted order (tokens unsorted)") {
    std::mt19937 rng(std::random_device{}());
    GroupedCase c{GroupedLayout::contiguous, 8, 96, 200, 256, ScaleLayout::linear, DType::bf16, DType::fp32};
    c.gather = true;
    run_grouped(c, rng);
    c = {GroupedLayout::contiguous, 8, 1500, 136, 320, ScaleLayout::swizzled128x4, DType::fp16, DType::fp16, true};
    c.gather = true, c.expected_m = 256;  // tall tiles narrowing their MMA, a prepacked weight, K past a box
    run_grouped(c, rng);
    c = {GroupedLayout::contiguous, 64, 300, 256, 512, ScaleLayout::linear, DType::bf16, DType::bf16};
    c.gather = true;
    run_grouped(c, rng, 2);  // captured, routing and row order redrawn between replays
    c.workspace = true, c.bad_indices = true;  // the same into a given workspace (else the call's own buffer)
    run_grouped(c, rng, 2);
    // persistent tiles, tiles of 48 rows and tall ones: every 7th routed row's index outside A
    for (int64_t expected_m : {8, 48, 256}) {
      CAPTURE(expected_m);
      c = {GroupedLayout::contiguous, 8, 700, 136, 768, ScaleLayout::linear, DType::fp16, DType::fp32};
      c.gather = true, c.bad_indices = true, c.expected_m = expected_m;
      run_grouped(c, rng);
    }
  }

  TEST_CASE("group sizes out of range are clamped: no row outside A and D is written") {
    std::mt19937 rng(std::random_device{}());
    run_grouped({GroupedLayout::contiguous, 8, 64, 128, 256, ScaleLayout::linear, DType::bf16, DType::fp32, false,
                 GroupedCase::out_of_range},
                rng);
    run_grouped({GroupedLayout::masked, 6, 24, 128, 256, ScaleLayout::linear, DType::bf16, DType::fp32, false,
                 GroupedCase::out_of_range},
                rng);
  }

  TEST_CASE("tune a grouped problem per expected_m bucket: the winner is recorded and grouped_gemm runs it, correctly") {
    std::mt19937 rng(std::random_device{}());
    GemmProblem problem;
    problem.n = 256, problem.k = 512, problem.d_dtype = DType::fp32, problem.groups = 8;
    TuneOptions options;
    options.m = 5, options.runs = 3;  // rows per expert: the bucket <= 8
    const std::vector<TunedBucket> tuned = tune(problem, options);
    REQUIRE(tuned.size() == 1);
    CHECK(tuned[0].m_bucket == 8);
    CHECK(tuned[0].candidates > 1);
    CHECK(tuned[0].winner_us <= tuned[0].heuristic_us);
    MESSAGE("tuned 8 experts of 256x512, expected_m <= 8: heuristic " << tuned[0].heuristic << " " << tuned[0].heuristic_us
                                                                      << " us, winner " << tuned[0].winner << " "
                                                                      << tuned[0].winner_us << " us");
    // the tile grouped_gemm's warm path now runs (the pointers only pass validation: nothing is launched)
    alignas(16) static unsigned char dummy[64];
    GroupedGemmArgs probe;
    probe.gemm.m = 40, probe.gemm.n = problem.n, probe.gemm.k = problem.k, probe.gemm.d_dtype = DType::fp32;
    probe.gemm.a = probe.gemm.b.data = probe.gemm.b.scales = probe.gemm.d = dummy;
    probe.groups = 8, probe.group_ends = reinterpret_cast<const int32_t*>(dummy), probe.expected_m = 5;
    auto tile_of = [&](const GroupedGemmArgs& g) {
      return sm90::from_config(gemm_dispatch(current_device(), grouped_gemm_call(g, "test"), nullptr).spec.tile);
    };
    CHECK(sm90::describe(tile_of(probe)) == tuned[0].winner);
    GroupedCase c{GroupedLayout::contiguous, 8, 40, 256, 512, ScaleLayout::linear, DType::bf16, DType::fp32};
    c.expected_m = 5;
    run_grouped(c, rng);
    // a masked problem of the same shape is another problem: still the heuristic's tile
    probe.layout = GroupedLayout::masked, probe.group_ends = nullptr, probe.masked_m = reinterpret_cast<const int32_t*>(dummy);
    probe.gemm.m = 5;
    GemmSpec masked = gemm_problem(current_device().arch, grouped_gemm_call(probe, "test"));
    CHECK(tile_of(probe) == sm90::from_config(gemm_backend(Arch::sm_90a, "test").heuristic(masked, 5, current_device().sm_count)));
    // past 512 rows per expert a grouped problem is not tuned
    options.m = 600;
    CHECK_THROWS_WITH_AS(tune(problem, options), doctest::Contains("more than the 512 a grouped problem is tuned for"), Error);
  }

  TEST_CASE("a captured grouped gemm replays with the routing changed between replays") {
    std::mt19937 rng(std::random_device{}());
    run_grouped({GroupedLayout::contiguous, 32, 128, 256, 256}, rng, 3);
    run_grouped({GroupedLayout::masked, 8, 32, 128, 256}, rng, 2);
  }

  TEST_CASE("batched: every row to every group (wo_a), strided A and D, T in {1, 16, 517}") {
    std::mt19937 rng(std::random_device{}());
    run_batched({8, 1, 200, 256}, rng);
    run_batched({8, 16, 256, 512, true, 8, ScaleLayout::swizzled128x4, DType::bf16, DType::bf16}, rng);
    run_batched({8, 517, 136, 320, false, 8, ScaleLayout::linear, DType::fp16, DType::fp16}, rng);  // ragged T, padded rows
    run_batched({4, 300, 256, 1024, true, 0, ScaleLayout::linear, DType::bf16, DType::fp32, true}, rng);  // prepacked
    run_batched({3, 70, 196, 256, false, 0, ScaleLayout::linear, DType::bf16, DType::bf16}, rng);  // D by element (rows of 392 bytes)
  }

  TEST_CASE("batched W4A4: A's global scale one, per group and per row; both scale layouts") {
    std::mt19937 rng(std::random_device{}());
    using B = BatchedCase;
    run_batched({8, 16, 200, 256, false, 0, ScaleLayout::linear, DType::nvfp4, DType::fp32, false, B::one}, rng);
    run_batched({8, 520, 256, 512, false, 0, ScaleLayout::swizzled128x4, DType::nvfp4, DType::bf16, false, B::per_group}, rng);
    run_batched({5, 33, 136, 256, true, 8, ScaleLayout::linear, DType::nvfp4, DType::fp32, false, B::per_row}, rng);
  }

  TEST_CASE("a captured batched gemm replays with fresh activations") {
    std::mt19937 rng(std::random_device{}());
    run_batched({8, 16, 256, 512, false, 0, ScaleLayout::swizzled128x4, DType::bf16, DType::bf16}, rng, 2);
    run_batched({8, 40, 200, 256, false, 0, ScaleLayout::linear, DType::nvfp4, DType::fp32, false, BatchedCase::per_row}, rng, 2);
  }
}
