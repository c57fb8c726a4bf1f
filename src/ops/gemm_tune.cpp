#include "ops/gemm_tune.hpp"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <random>
#include <thread>

#include "core/driver.hpp"
#include "core/error.hpp"
#include "core/gpu_util.hpp"
#include "core/prewarm.hpp"
#include "common/prepacked_weight.cuh"
#include "core/tuning_table.hpp"
#include "ops/gemm_op.hpp"

namespace nvfp4::jit::detail {

namespace {

// A winner must beat the heuristic by this much: timing noise never replaces it.
constexpr double kMinGain = 0.02;

std::string device_name(const DeviceInfo& device) {
  char name[256] = {};
  check_cu(driver().cuDeviceGetName(name, sizeof name, device.device), "cuDeviceGetName");
  return name;
}

TuningTable& table_of(const DeviceInfo& device) {
  thread_local int last_device = -1;
  thread_local TuningTable* last = nullptr;
  if (last_device != int(device.device)) {
    last = &tuning_table_for(int(device.device), device.arch, device_name(device), device.sm_count);
    last_device = int(device.device);
  }
  return *last;
}

bool capturing(CUstream stream) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  const CUresult r = driver().cuStreamIsCapturing(stream, &status);
  return r != CUDA_SUCCESS || status != CU_STREAM_CAPTURE_STATUS_NONE;
}

GemmProblem problem_of(const GemmArgs& a) {
  return {a.n, a.k, a.a_dtype, a.d_dtype, a.b.scale_layout, a.bias != nullptr, a.bias_dtype, a.b_prepacked};
}

// Scratch inputs for timing: random activations, `copies` weights at different addresses
// (L2 keys on addresses, so rotating through them keeps every read cold), an output buffer.
struct Scratch {
  DeviceBuffer a, d, bias, gscale;
  std::vector<DeviceBuffer> packed, scales;
  Scratch(const GemmProblem& p, int64_t m, int copies) {
    std::mt19937_64 rng(0x9e3779b97f4a7c15ull);
    auto random = [&](size_t bytes, uint64_t mask, uint64_t add) {  // 8 bytes at a time
      std::vector<uint64_t> v((bytes + 7) / 8);
      for (auto& x : v) x = (rng() & mask) + add;
      return v;
    };
    // activations: 16-bit values in [2^-7, 2) (BF16 and FP16 alike: exponent bits kept small)
    a = to_device(random(size_t(m * p.k * 2), 0x03FF03FF03FF03FFull, 0x3C003C003C003C00ull));
    d = DeviceBuffer(size_t(m * p.n * 4));
    bias = DeviceBuffer(size_t(p.n * 4));
    bias.fill(0);
    auto w = random(size_t(p.b_prepacked ? prepacked_bytes(p.n, p.k) : p.n * p.k / 2), ~0ull, 0);
    if (p.b_prepacked) {  // each chunk's scale bytes finite
      auto* bytes = reinterpret_cast<unsigned char*>(w.data());
      for (int64_t at = 0; at < prepacked_bytes(p.n, p.k); at += nvfp4k::prepacked::CHUNK_BYTES)
        for (int i = nvfp4k::prepacked::VALUE_BYTES; i < nvfp4k::prepacked::CHUNK_BYTES; ++i) bytes[at + i] &= 0x3F;
    }
    const auto s = random(size_t(scale_bytes(p.scale_layout, p.n, p.k)), 0x3F3F3F3F3F3F3F3Full, 0);  // finite scales
    for (int i = 0; i < copies; ++i) {
      packed.push_back(to_device(w));
      scales.push_back(to_device(s));
    }
  }
};

GemmArgs scratch_args(const GemmProblem& p, int64_t m, const Scratch& s, int copy) {
  GemmArgs g;
  g.m = m, g.n = p.n, g.k = p.k;
  g.a = s.a.get(), g.a_dtype = p.a_dtype;
  g.b.data = s.packed[size_t(copy)].get();
  g.b.scales = s.scales[size_t(copy)].get();
  g.b.scale_layout = p.scale_layout;
  g.b_prepacked = p.b_prepacked;
  g.b.global_scale.value = 1.0f / 256;
  g.d = s.d.get(), g.d_dtype = p.d_dtype;
  if (p.has_bias) g.bias = s.bias.get(), g.bias_dtype = p.bias_dtype;
  return g;
}

}  // namespace

KernelSpec gemm_problem(Arch arch, const GemmProblem& p) {
  KernelSpec spec = gemm_spec(arch, p.n, p.k, p.a_dtype, p.d_dtype, gemm_weight_layout(p.scale_layout, p.b_prepacked),
                              p.has_bias ? uint8_t(p.bias_dtype) : kNoDType, GemmTile{});
  spec.tile = TileConfig{};
  return spec;
}

std::vector<TunedBucket> tune_gemm(const DeviceInfo& device, const GemmProblem& p, const std::vector<int>& buckets,
                                   int runs) {
  // Every candidate of every bucket compiles first, in parallel (most come from the cache).
  auto spec_of = [&](const GemmTile& t) {
    return gemm_spec(device.arch, p.n, p.k, p.a_dtype, p.d_dtype, gemm_weight_layout(p.scale_layout, p.b_prepacked),
                     p.has_bias ? uint8_t(p.bias_dtype) : kNoDType, t);
  };
  std::vector<std::vector<GemmTile>> candidates;
  std::vector<KernelSpec> specs;
  for (int bucket : buckets) {
    candidates.push_back(gemm_candidates(device.arch, p.n, p.k, bucket, device.sm_count, p.b_prepacked));
    for (const GemmTile& t : candidates.back()) specs.push_back(spec_of(t));
  }
  auto compile_all = [](const std::vector<KernelSpec>& all) {
    std::string error;
    prewarm(all, int(std::max(1u, std::thread::hardware_concurrency())), [&](const PrewarmEvent& e) {
      if (!e.error.empty() && error.empty()) error = e.error;
    });
    if (!error.empty()) fail(Status::compile_failed, "tune: {}", error);
  };
  compile_all(specs);

  CUstream stream = nullptr;
  check_cu(driver().cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  struct StreamGuard {
    CUstream s;
    ~StreamGuard() { driver().cuStreamDestroy(s); }
  } guard{stream};
  int l2_bytes = 0;
  driver().cuDeviceGetAttribute(&l2_bytes, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, device.device);
  const double weight_bytes = double(p.n) * p.k * (0.5 + 1.0 / 16);
  const int copies = int(std::clamp(2.0 * l2_bytes / weight_bytes + 1, 2.0, 16.0));
  EventTimer timer;

  std::vector<TunedBucket> results;
  std::vector<TuningEntry> entries;
  std::vector<KernelSpec> winners_trimmed;  // a winner runs trimmed to each M's rows: compiled before it is recorded
  for (size_t b = 0; b < buckets.size(); ++b) {
    const int64_t m = gemm_bucket_m(buckets[b]);
    const Scratch scratch(p, m, copies);
    int turn = 0;
    auto time_us = [&](const GemmTile& tile) {
      std::vector<double> us;
      for (int i = 0; i < runs + 2; ++i) {
        const GemmArgs g = scratch_args(p, m, scratch, turn++ % copies);
        timer.start(stream);
        gemm_with_tile(g, tile, stream);
        const double t = timer.stop_ms(stream) * 1e3;
        if (i >= 2) us.push_back(t);  // the first two warm clocks and caches of descriptors
      }
      std::sort(us.begin(), us.end());
      return us[us.size() / 2];
    };
    const std::vector<GemmTile>& tiles = candidates[b];
    std::vector<double> us;
    for (const GemmTile& t : tiles) us.push_back(time_us(t));
    size_t best = size_t(std::min_element(us.begin(), us.end()) - us.begin());
    if (us[0] <= us[best] * (1 + kMinGain)) best = 0;  // tiles[0] is the heuristic's

    TunedBucket r;
    r.m_bucket = buckets[b] == kGemmLargeM ? 0 : buckets[b];
    r.heuristic = describe(tiles[0]);
    r.winner = describe(tiles[best]);
    r.heuristic_us = us[0];
    r.winner_us = us[best];
    r.candidates = int(tiles.size());
    results.push_back(r);
    TuningEntry e;
    e.problem = gemm_problem(device.arch, p);
    e.m_bucket = buckets[b];
    e.tile = gemm_spec(device.arch, p.n, p.k, p.a_dtype, p.d_dtype, gemm_weight_layout(p.scale_layout, p.b_prepacked),
                      kNoDType, tiles[best]).tile;
    e.us = us[best];
    e.heuristic_us = us[0];
    entries.push_back(e);
    if (best != 0)
      for (const GemmTile& t : gemm_tuned_tiles(tiles[best], buckets[b]))
        winners_trimmed.push_back(spec_of(t));
  }
  compile_all(winners_trimmed);
  if (std::string why = table_of(device).record(entries); !why.empty())
    warn_once("tuning-write", "tuning results are kept in this process only: " + why);
  return results;
}

GemmTile gemm_tile_for(const DeviceInfo& device, const GemmArgs& args, CUstream stream) {
  static const bool autotune = [] {
    const char* v = std::getenv("NVFP4_JIT_AUTOTUNE");
    return v && std::string(v) == "1";
  }();
  const int bucket = gemm_m_bucket(args.m);
  TuningTable& table = table_of(device);
  const KernelSpec problem = gemm_problem(device.arch, problem_of(args));
  auto tuned = [&]() -> std::optional<GemmTile> {
    if (auto tile = table.find(problem, bucket)) {
      KernelSpec spec = problem;
      spec.tile = *tile;
      return gemm_tile_of(spec);
    }
    return std::nullopt;
  };
  std::optional<GemmTile> tile = tuned();
  if (!tile && autotune && !capturing(stream)) {
    tune_gemm(device, problem_of(args), {bucket}, 10);
    tile = tuned();
  }
  return gemm_tile_choice(tile ? &*tile : nullptr, device.arch, args.n, args.k, args.m, device.sm_count,
                          args.b_prepacked);
}

}  // namespace nvfp4::jit::detail

namespace nvfp4::jit {

std::vector<TunedBucket> tune(const GemmProblem& problem, const TuneOptions& options) {
  using namespace detail;
  // the arguments gemm would check, on a problem with M = 1
  GemmArgs probe;
  probe.m = 0, probe.n = problem.n, probe.k = problem.k;
  probe.a_dtype = problem.a_dtype, probe.d_dtype = problem.d_dtype;
  probe.b.scale_layout = problem.scale_layout;
  probe.b_prepacked = problem.b_prepacked;
  probe.bias_dtype = problem.bias_dtype;
  gemm(probe, nullptr);  // m = 0: validates and returns
  if (options.runs < 1) fail(Status::invalid_argument, "nvfp4::jit::tune: runs = {} must be at least 1", options.runs);
  if (options.m < 0) fail(Status::invalid_argument, "nvfp4::jit::tune: m = {} must be 0 (every bucket) or positive", options.m);
  const DeviceInfo& device = current_device();
  if (device.arch != Arch::sm_90a)
    fail(Status::unsupported, "nvfp4::jit::tune: the NVFP4 GEMM runs on sm_90a devices; this device is {}",
         to_string(device.arch));
  std::vector<int> buckets;
  if (options.m > 0) buckets.push_back(gemm_m_bucket(options.m));
  else buckets.assign(std::begin(kGemmMBuckets), std::end(kGemmMBuckets));
  GemmProblem kernel_problem = problem;
  if (problem.a_dtype == DType::nvfp4) kernel_problem.a_dtype = DType::bf16;  // W4A4 runs the BF16 kernel
  return tune_gemm(device, kernel_problem, buckets, options.runs);
}

}  // namespace nvfp4::jit
