#include "ops/gemm/tune.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "common/params.cuh"
#include "common/tile_scheduler.cuh"
#include "core/driver.hpp"
#include "core/error.hpp"
#include "core/gpu_util.hpp"
#include "core/manifest.hpp"
#include "core/prewarm.hpp"
#include "core/tuning_table.hpp"
#include "ops/gemm/call.hpp"
#include "ops/gemm/fp8_activations_op.hpp"
#include "ops/gemm/launch.hpp"
#include "ops/gemm/m_buckets.hpp"
#include "ops/gemm/routing_draw.hpp"
#include "ops/gemm/tile_choice.hpp"

namespace nvfp4::jit::detail {

namespace {

constexpr const char* kWho = "nvfp4::jit::tune";
// A winner must beat the heuristic by this much: timing noise never replaces it.
constexpr double kMinGain = 0.02;

// NVFP4_JIT_TUNE_LOG=1: every candidate's time on stderr, for the heuristic's next revision.
bool log_candidates() {
  static const bool on = [] {
    const char* v = std::getenv("NVFP4_JIT_TUNE_LOG");
    return v && std::string(v) == "1";
  }();
  return on;
}

// Scratch inputs for timing: random activations (16-bit, or NVFP4 with finite scales in the
// problem's A layout), `copies` weights at different addresses (L2 keys on addresses, so
// rotating through them keeps every read cold), an output buffer. A prepacked problem's
// weights are prepacked here from random ModelOpt ones.
// A grouped problem's M is rows per expert (expected_m). Its gigabytes of weights and
// activations are filled with one finite byte each rather than random ones: the kernels' time
// does not depend on them. It is timed on one or two routings (grouped_tuning_routings).
struct Scratch {
  static constexpr int64_t kMaxGroupedRows = 32768;
  // Rows per expert of one routing: contiguous ends or masked counts on the device.
  struct Routing {
    DeviceBuffer group_sizes;
    int64_t rows = 0;  // of A and D (a masked problem's: every group's m)
    int32_t max_rows = 0;
    int32_t experts = 0;  // holding rows
  };
  DeviceBuffer a, a_scales, d, bias;
  int64_t d_scales_at = 0;  // NVFP4 D: its scales' offset in d, after its packed rows
  DeviceBuffer fp8_a;  // W4A8: A as E4M3 and its row scales (the kernel's input; the activation pass is the same for every tile)
  std::vector<DeviceBuffer> weights, scales;
  std::vector<Routing> routings;  // a dense problem's: one, of m rows
  int32_t groups = 0;
  GroupedLayout layout = GroupedLayout::contiguous;

  Scratch(const GemmSpec& p, int64_t m, int copies, CUstream stream) {
    std::mt19937_64 rng(0x9e3779b97f4a7c15ull);
    auto random = [&](size_t bytes, uint64_t mask, uint64_t add) {  // 8 bytes at a time
      std::vector<uint64_t> v((bytes + 7) / 8);
      for (auto& x : v) x = (rng() & mask) + add;
      return v;
    };
    const bool prepacked = gemm_problem_prepacked(p);
    const ScaleLayout layout_b = prepacked ? ScaleLayout::linear : ScaleLayout(p.scale_layout);
    int64_t rows = m;
    if (gemm_problem_grouped(p)) {
      groups = std::max(1, p.groups);
      layout = gemm_problem_grouped(p) == nvfp4k::GROUPED_MASKED ? GroupedLayout::masked : GroupedLayout::contiguous;
      rows = 0;
      for (const std::vector<int32_t>& counts : grouped_tuning_routings(groups, m, kMaxGroupedRows, rng)) {
        Routing r;
        r.max_rows = *std::max_element(counts.begin(), counts.end());
        r.experts = int32_t(std::count_if(counts.begin(), counts.end(), [](int32_t c) { return c > 0; }));
        std::vector<int32_t> sizes = counts;  // masked: rows per group; contiguous: cumulative ends
        if (layout == GroupedLayout::contiguous)
          for (size_t g = 1; g < sizes.size(); ++g) sizes[g] += sizes[g - 1];
        r.rows = layout == GroupedLayout::masked ? int64_t(groups) * r.max_rows : sizes.back();
        r.group_sizes = to_device(sizes);
        rows = std::max(rows, r.rows);
        routings.push_back(std::move(r));
      }
      a = DeviceBuffer(size_t(rows * p.k * 2));
      a.fill(0x3C);  // BF16 / FP16 values near 1
      const int64_t weight_bytes = prepacked ? prepacked_bytes(p.n, p.k) : p.n * p.k / 2;
      for (int i = 0; i < copies; ++i) {
        weights.emplace_back(size_t(groups * weight_bytes));
        weights.back().fill(0x38);  // E2M1 codes 3 and 8; prepacked, E4M3 scales of 1
        if (!prepacked) {
          scales.emplace_back(size_t(groups * scale_bytes(layout_b, p.n, p.k)));
          scales.back().fill(0x38);  // E4M3 1.0
        }
      }
    } else {
      routings.emplace_back().rows = m;
      // activations: 16-bit values in [2^-7, 2) (BF16 and FP16 alike: exponent bits kept small);
      // as NVFP4, the same bytes are e2m1 codes (every one finite)
      a = to_device(random(size_t(m * p.k * 2), 0x03FF03FF03FF03FFull, 0x3C003C003C003C00ull));
      if (p.a_dtype == uint8_t(DType::nvfp4))
        a_scales = to_device(random(size_t(scale_bytes(a_scale_layout(p), m, p.k)), 0x3F3F3F3F3F3F3F3Full, 0));
      const auto w = random(size_t(p.n * p.k / 2), ~0ull, 0);
      const auto s = random(size_t(scale_bytes(layout_b, p.n, p.k)), 0x3F3F3F3F3F3F3F3Full, 0);  // finite scales
      for (int i = 0; i < copies; ++i) {
        weights.push_back(to_device(w));
        scales.push_back(to_device(s));
        if (prepacked) {
          DeviceBuffer packed(size_t(prepacked_bytes(p.n, p.k)));
          PrepackArgs pre;
          pre.weight.data = weights.back().get();
          pre.weight.scales = scales.back().get();
          pre.weight.scale_layout = layout_b;
          pre.n = p.n, pre.k = p.k, pre.out = packed.get();
          prepack(pre, stream);
          weights.back() = std::move(packed);
        }
      }
    }
    if (gemm_problem_w4a8(p)) {
      // E4M3 values in [1, 2) with random signs, row scales of 1/448 (fp32 0x3B124925)
      std::vector<uint64_t> values = random(size_t(fp8_row_scales_offset(rows, p.k)), 0x8787878787878787ull, 0x3838383838383838ull);
      values.resize(size_t(fp8_activation_bytes(rows, p.k) + 7) / 8, 0x3B1249253B124925ull);
      fp8_a = to_device(values);
    }
    d_scales_at = rows * p.n;
    d = DeviceBuffer(size_t(rows * p.n * 4 + (rows + 127) * (p.n / 32 + 4)));
    bias = DeviceBuffer(size_t(p.n * 4));
    bias.fill(0);
    check_cu(driver().cuStreamSynchronize(stream), "cuStreamSynchronize");
  }

  static ScaleLayout a_scale_layout(const GemmSpec& p) {
    return p.flags & kFlagAScalesSwizzled ? ScaleLayout::swizzled128x4 : ScaleLayout::linear;
  }

  GemmCall call(const GemmSpec& p, int64_t m, int copy, const Routing& routing) const {
    GemmArgs g;
    g.m = !groups ? m : layout == GroupedLayout::contiguous ? routing.rows : routing.max_rows;
    g.n = p.n, g.k = p.k;
    g.a_dtype = DType(p.a_dtype);
    if (g.a_dtype == DType::nvfp4)
      g.a_fp4.data = a.get(), g.a_fp4.scales = a_scales.get(), g.a_fp4.scale_layout = a_scale_layout(p);
    else
      g.a = a.get();
    g.b.data = weights[size_t(copy)].get();
    g.b_prepacked = gemm_problem_prepacked(p);
    g.precision = gemm_problem_w4a8(p) ? GemmPrecision::w4a8 : GemmPrecision::exact;  // (its workspace on the stream)
    g.b.scales = scales.empty() ? nullptr : scales[size_t(copy)].get();  // (a grouped prepacked weight holds its own)
    g.b.scale_layout = g.b_prepacked ? ScaleLayout::linear : ScaleLayout(p.scale_layout);
    g.b.global_scale.value = 1.0f / 256;
    g.d_dtype = DType(p.out_dtype);
    if (g.d_dtype == DType::nvfp4)
      g.d_fp4.data = d.get(), g.d_fp4.scales = static_cast<unsigned char*>(d.get()) + d_scales_at;
    else
      g.d = d.get();
    g.epilogue = p.flags & kFlagEpilogueSwiglu ? GemmEpilogue::swiglu : GemmEpilogue::none;
    if (p.flags & (kFlagBiasBf16 | kFlagBiasFp32))
      g.bias = bias.get(), g.bias_dtype = p.flags & kFlagBiasBf16 ? DType::bf16 : DType::fp32;
    GemmCall call;
    if (!groups) {
      call = gemm_call(g, kWho);
    } else {
      GroupedGemmArgs ga;
      ga.gemm = g, ga.groups = groups, ga.layout = layout, ga.expected_m = m;
      (layout == GroupedLayout::masked ? ga.masked_m : ga.group_ends) = routing.group_sizes.as<int32_t>();
      call = grouped_gemm_call(ga, kWho);
    }
    return gemm_problem_w4a8(p) ? gemm_call_on_fp8_a(call, fp8_a.get()) : call;
  }
};

void compile_all(const std::vector<GemmSpec>& gemm_specs) {
  std::vector<KernelSpec> specs;
  for (const GemmSpec& spec : gemm_specs) specs.push_back(gemm_key(spec));
  std::string error;
  prewarm(specs, int(std::max(1u, std::thread::hardware_concurrency())), [&](const PrewarmEvent& e) {
    if (!e.error.empty() && error.empty()) error = e.error;
  });
  if (!error.empty()) fail(Status::compile_failed, "tune: {}", error);
}

}  // namespace

int64_t grouped_rows_for_expected_m(int32_t groups, int64_t m) {
  int64_t lo = 1, hi = 2 * int64_t(groups) * m;  // at twice m rows an expert the default is past m
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (grouped_default_expected_m(mid, groups) <= m) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

std::vector<std::vector<int32_t>> grouped_tuning_routings(int32_t groups, int64_t m, int64_t max_rows, std::mt19937_64& rng) {
  std::vector<std::vector<int32_t>> routings(1, std::vector<int32_t>(size_t(groups)));
  const int64_t heaviest = grouped_rows_for_expected_m(groups, m);
  const int32_t touched = int32_t(std::clamp<int64_t>(max_rows * groups / heaviest, 1, groups));
  const int64_t routed = std::max<int64_t>(1, heaviest * touched / groups);
  // each row one token's id among the touched experts, those spread over the groups
  const std::vector<int32_t> rows = rows_per_expert(draw_topk_ids(RoutingDraw::uniform, routed, touched, 1, rng), touched);
  for (int32_t e = 0; e < touched; ++e) routings[0][size_t(int64_t(e) * groups / touched)] = rows[size_t(e)];
  if (m <= kTunedOneTokenM) {
    const int32_t touched = std::min(groups, kTunedOneTokenExperts);
    std::vector<int32_t>& one = routings.emplace_back(size_t(groups));
    for (int32_t i = 0; i < touched; ++i) one[size_t(int64_t(i) * groups / touched)] = 1;
  }
  return routings;
}

std::vector<TunedBucket> tune_gemm(const DeviceInfo& device, const GemmSpec& problem, const std::vector<int>& buckets,
                                   int runs, int64_t grouped_m) {
  const GemmBackend& backend = gemm_backend(device.arch, kWho);
  if (std::string why = backend.unsupported(problem); !why.empty())
    fail(Status::unsupported, "{}: {} on {}", kWho, why, to_string(device.arch));
  // Every candidate of every bucket compiles first, in parallel (most come from the cache).
  std::vector<std::vector<GemmTile>> candidates;
  std::vector<GemmSpec> specs;
  for (int bucket : buckets) {
    candidates.push_back(backend.candidates(problem, bucket, device.sm_count));
    for (const GemmTile& t : candidates.back()) specs.push_back(gemm_kernel_spec(backend, problem, t));
  }
  compile_all(specs);

  CUstream stream = nullptr;
  check_cu(driver().cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  struct StreamGuard {
    CUstream s;
    ~StreamGuard() { driver().cuStreamDestroy(s); }
  } guard{stream};
  int l2_bytes = 0;
  driver().cuDeviceGetAttribute(&l2_bytes, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, device.device);
  const bool grouped = gemm_problem_grouped(problem);
  const double weight_bytes = double(problem.n) * problem.k * (0.5 + 1.0 / 16) * (grouped ? problem.groups : 1);
  const int copies = int(std::clamp(2.0 * l2_bytes / weight_bytes + 1, grouped ? 1.0 : 2.0, 16.0));
  EventTimer timer;

  std::vector<TunedBucket> results;
  std::vector<TuningEntry> entries;
  std::vector<GemmSpec> winners_trimmed;  // a winner runs trimmed to each M's rows: compiled before it is recorded
  for (size_t b = 0; b < buckets.size(); ++b) {
    const int64_t m = grouped && grouped_m > 0 ? grouped_m : gemm_bucket_m(buckets[b]);
    const Scratch scratch(problem, m, copies, stream);
    int turn = 0;
    // The median of `runs` launches on one routing.
    auto median_us = [&](const GemmTile& tile, const Scratch::Routing& routing) {
      const GemmCall first = scratch.call(problem, m, 0, routing);
      const GemmKernel kernel = load_gemm_kernel(device, backend, gemm_spec(problem, tile), first.args.m, stream, first);
      std::vector<double> us;
      for (int i = 0; i < runs + 2; ++i) {
        const GemmCall call = scratch.call(problem, m, turn++ % copies, routing);
        timer.start(stream);
        launch_gemm(kernel, call, stream);
        const double t = timer.stop_ms(stream) * 1e3;
        if (i >= 2) us.push_back(t);  // the first two warm clocks and caches of descriptors
      }
      std::sort(us.begin(), us.end());
      return us[us.size() / 2];
    };
    // A tile's time: over two routings their geometric mean, so that each weighs by its ratio
    // and neither by its size.
    auto time_us = [&](const GemmTile& tile) {
      double log_sum = 0;
      for (const Scratch::Routing& routing : scratch.routings) {
        const double us = median_us(tile, routing);
        log_sum += std::log(us);
        if (log_candidates())
          std::fprintf(stderr, "tune: N %lld K %lld%s M %lld%s: %-28s %10.2f us\n", (long long)problem.n, (long long)problem.k,
                       grouped ? fmt::format(" G {}", problem.groups).c_str() : "", (long long)m,
                       grouped ? fmt::format(" ({} rows, {} experts)", routing.rows, routing.experts).c_str() : "", backend.describe(tile).c_str(), us);
      }
      return std::exp(log_sum / double(scratch.routings.size()));
    };
    const std::vector<GemmTile>& tiles = candidates[b];
    std::vector<double> us;
    for (const GemmTile& t : tiles) us.push_back(time_us(t));
    size_t best = size_t(std::min_element(us.begin(), us.end()) - us.begin());
    if (us[0] <= us[best] * (1 + kMinGain)) best = 0;  // tiles[0] is the heuristic's

    TunedBucket r;
    r.m_bucket = buckets[b] == kGemmLargeM ? 0 : buckets[b];
    r.heuristic = backend.describe(tiles[0]);
    r.winner = backend.describe(tiles[best]);
    r.heuristic_us = us[0];
    r.winner_us = us[best];
    r.candidates = int(tiles.size());
    results.push_back(r);
    TuningEntry e;
    e.tuned = gemm_key(gemm_spec(problem, tiles[best]));
    e.m_bucket = buckets[b];
    e.us = us[best];
    e.heuristic_us = us[0];
    entries.push_back(e);
    if (best != 0)
      for (const GemmTile& t : gemm_tuned_tiles(backend, tiles[best], buckets[b]))
        winners_trimmed.push_back(gemm_kernel_spec(backend, problem, t));
  }
  compile_all(winners_trimmed);
  if (std::string why = gemm_tuning_table(device).record(entries); !why.empty())
    warn_once("tuning-write", "tuning results are kept in this process only: " + why);
  gemm_tuning_generation.fetch_add(1, std::memory_order_relaxed);
  return results;
}

}  // namespace nvfp4::jit::detail

namespace nvfp4::jit {

std::vector<TunedBucket> tune(const GemmProblem& problem, const TuneOptions& options) {
  using namespace detail;
  if (problem.epilogue == GemmEpilogue::moe_combine)
    fail(Status::invalid_argument, "{}: epilogue moe_combine runs the tiles tuned for its grouped GEMM without it: tune the "
         "problem with epilogue none", kWho);
  // the arguments gemm would check, on a problem with M = 0
  GemmArgs probe;
  probe.m = 0, probe.n = problem.n, probe.k = problem.k;
  probe.a_dtype = problem.a_dtype, probe.d_dtype = problem.d_dtype;
  probe.b.scale_layout = problem.scale_layout;
  probe.b_prepacked = problem.b_prepacked;
  probe.bias_dtype = problem.bias_dtype;
  probe.a_fp4.scale_layout = problem.a_scale_layout;
  probe.epilogue = problem.epilogue;
  gemm_call(probe, "nvfp4::jit::gemm");
  if (options.runs < 1) fail(Status::invalid_argument, "{}: runs = {} must be at least 1", kWho, options.runs);
  if (options.m < 0) fail(Status::invalid_argument, "{}: m = {} must be 0 (every bucket) or positive", kWho, options.m);
  if (problem.groups)  // (0: a dense weight)
    if (const std::string why = weight_shape_problem(problem.n, problem.k, problem.groups); !why.empty())
      fail(Status::invalid_argument, "{}: {}", kWho, why);
  if (problem.groups && problem.grouped_layout != GroupedLayout::contiguous && problem.grouped_layout != GroupedLayout::masked)
    fail(Status::invalid_argument, "{}: grouped_layout = {} is not contiguous or masked (a batched weight's tile follows its "
         "rows: it has no expected_m to tune for)", kWho, int(problem.grouped_layout));
  if (problem.groups && options.m > kMaxTunedGroupedM)
    fail(Status::invalid_argument, "{}: m = {} rows per expert is more than the {} a grouped problem is tuned for", kWho,
         options.m, kMaxTunedGroupedM);
  const DeviceInfo& device = current_device();
  std::vector<int> buckets;
  if (options.m > 0) buckets.push_back(gemm_m_bucket(options.m));
  else
    for (int b : kGemmMBuckets)
      if (!problem.groups || b <= kMaxTunedGroupedM) buckets.push_back(b);
  // W4A4: the BF16 kernel's problem, unless the arch's kernels read NVFP4 activations
  GemmSpec spec = gemm_problem(device.arch, problem);
  if (problem.a_dtype == DType::nvfp4 && gemm_backend(device.arch, kWho).native_fp4_activations())
    spec = gemm_fp4_problem(spec, problem.a_scale_layout);
  return tune_gemm(device, spec, buckets, options.runs, problem.groups ? options.m : 0);
}

}  // namespace nvfp4::jit
