// nvfp4-jit bench core|dequantize|quantize|rmsnorm-quantize|swiglu-quantize|mhc-rmsnorm-quantize|gemm|grouped: timings on this machine's GPU, printed and saved as JSON.
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/bench_util.hpp"
#include "cli/cli.hpp"
#include "common/params.cuh"
#include "core/gpu_util.hpp"
#include "core/kernel_store.hpp"
#include "core/launcher.hpp"
#include "ops/dequantize_op.hpp"
#include "ops/moe_route_op.hpp"

namespace nvfp4::jit::cli {

using namespace detail;

namespace {

// One dequantize problem on the device: NVFP4 [rows, k] -> BF16.
struct Problem {
  int64_t rows, k;
  DeviceBuffer packed, scales, out;
  Problem(int64_t rows_, int64_t k_, std::mt19937& rng)
      : rows(rows_), k(k_), packed(to_device(random_bytes(rows_ * k_ / 2, rng))),
        scales(to_device(random_scales(rows_ * k_ / 16, rng))), out(rows_ * k_ * 2) {}
  DequantizeArgs args() const {
    DequantizeArgs a;
    a.src.data = packed.get();
    a.src.scales = scales.get();
    a.src.global_scale.value = 0.5f;
    a.src_rows = rows;
    a.k = k;
    a.out = out.get();
    return a;
  }
  double bytes() const { return double(rows) * k * (0.5 + 1.0 / 16 + 2); }
};

Json bench_core(bool quick) {
  std::mt19937 rng(std::random_device{}());
  // Cold compiles into an empty cache, through a store of our own so the process-wide one
  // still has to go to disk afterwards: that second step is the disk hit.
  char dir[] = "/tmp/nvfp4-jit-bench-XXXXXX";
  if (!::mkdtemp(dir)) throw std::runtime_error("mkdtemp failed");
  ::setenv("NVFP4_JIT_CACHE_DIR", dir, 1);
  const int kernels = quick ? 4 : 12;
  const DeviceInfo& device = current_device();
  std::vector<KernelSpec> specs;
  for (int i = 0; i < kernels; ++i) specs.push_back(dequantize_spec(device.arch, 4096 + 32 * i, DType::bf16, ScaleLayout::linear));
  KernelStore cold(CacheRoots{dir, {}});
  std::vector<double> compile_ms, disk_hit_ms;
  for (const KernelSpec& s : specs) {
    const auto t0 = Clock::now();
    cold.get(s);
    compile_ms.push_back(since_us(t0) / 1e3);
  }
  std::vector<Problem> problems;
  for (int i = 0; i < kernels; ++i) problems.emplace_back(64, 4096 + 32 * i, rng);
  for (const Problem& p : problems) {
    const auto t0 = Clock::now();
    dequantize(p.args(), nullptr);  // disk read + module load + launch
    disk_hit_ms.push_back(since_us(t0) / 1e3);
    check_cu(driver().cuCtxSynchronize(), "cuCtxSynchronize");
  }
  // Warm dispatch: host time per call, in batches so the launch queue never fills.
  const DequantizeArgs warm = problems[0].args();
  const int batches = quick ? 40 : 400, per_batch = 250;
  auto host_us = [&](auto&& call) {  // median host time of a warm call
    call();  // compile or load
    std::vector<double> us;
    for (int b = 0; b < batches; ++b) {
      for (int i = 0; i < per_batch; ++i) {
        const auto t0 = Clock::now();
        call();
        us.push_back(since_us(t0));
      }
      check_cu(driver().cuCtxSynchronize(), "cuCtxSynchronize");
    }
    return median(us);
  };
  const double w = host_us([&] { dequantize(warm, nullptr); });
  std::vector<double> raw_us;
  const CUfunction fn = find_kernel(device, specs[0]);
  // The floor: the same launch straight through cuLaunchKernelEx.
  nvfp4k::DequantizeParams raw{};
  raw.packed = static_cast<const unsigned char*>(warm.src.data);
  raw.packed_stride = warm.k / 2;
  raw.scales = static_cast<const unsigned char*>(warm.src.scales);
  raw.gscale_value = 1;
  raw.out = warm.out;
  raw.out_stride = warm.k;
  raw.src_rows = raw.rows = warm.src_rows;
  void* params[] = {&raw};
  LaunchShape shape;
  shape.grid[0] = unsigned((warm.src_rows * warm.k / 8 + 1023) / 1024);
  shape.block[0] = 256;
  std::vector<double> legacy_us;
  for (int b = 0; b < batches; ++b) {
    for (int i = 0; i < per_batch; ++i) {
      const auto t0 = Clock::now();
      launch(fn, shape, nullptr, params);
      raw_us.push_back(since_us(t0));
    }
    for (int i = 0; i < per_batch; ++i) {
      const auto t0 = Clock::now();
      check_cu(driver().cuLaunchKernel(fn, shape.grid[0], 1, 1, 256, 1, 1, 0, nullptr, params, nullptr), "cuLaunchKernel");
      legacy_us.push_back(since_us(t0));
    }
    check_cu(driver().cuCtxSynchronize(), "cuCtxSynchronize");
  }
  // A warm gemm call (two TMA descriptors, reused from the last call, plus a cluster launch).
  const int64_t gn = 4096, gk = 4096, gm = 16;
  DeviceBuffer ga = to_device(random_bf16(size_t(gm * gk), rng)), gw = to_device(random_bytes(size_t(gn * gk / 2), rng)),
               gs = to_device(random_scales(size_t(gn * gk / 16), rng)), gd(size_t(gm * gn * 2));
  GemmArgs g;
  g.m = gm, g.n = gn, g.k = gk;
  g.a = ga.get();
  g.b.data = gw.get();
  g.b.scales = gs.get();
  g.d = gd.get();
  // W4A4: A's decode and the GEMM, two launches
  DeviceBuffer a4 = to_device(random_bytes(size_t(gm * gk / 2), rng)), a4s = to_device(random_scales(size_t(gm * gk / 16), rng)),
               workspace(size_t(gm * gk * 2));
  GemmArgs g4 = g;
  g4.a = nullptr, g4.a_dtype = DType::nvfp4;
  g4.a_fp4.data = a4.get(), g4.a_fp4.scales = a4s.get();
  g4.workspace = workspace.get(), g4.workspace_bytes = int64_t(workspace.bytes());
  const double gw_us = host_us([&] { gemm(g, nullptr); }), g4_us = host_us([&] { gemm(g4, nullptr); });
  const double c = median(compile_ms), h = median(disk_hit_ms), r = median(raw_us),
               l = median(legacy_us);
  std::printf("bench core (%d kernels, %zu dispatches)\n", kernels, size_t(batches) * per_batch);
  std::printf("  cold NVRTC compile, median per kernel   %8.1f ms   (target <= 400 ms)\n", c);
  std::printf("  disk-cache hit, load to first launch    %8.2f ms   (target <= 5 ms)\n", h);
  std::printf("  warm dispatch host time per call        %8.2f us   (target <= 3 us)\n", w);
  std::printf("  bare cuLaunchKernelEx of the same       %8.2f us\n", r);
  std::printf("  bare cuLaunchKernel of the same         %8.2f us\n", l);
  std::printf("  warm gemm dispatch (M=16, N=K=4096)     %8.2f us   (target <= bare cuLaunchKernelEx + 0.5 us)\n", gw_us);
  std::printf("  warm W4A4 gemm dispatch, two launches   %8.2f us   (target <= twice that)\n", g4_us);
  return {{"cold_compile_ms_median", rounded(c, 2)},
          {"disk_hit_ms_median", rounded(h, 3)},
          {"dispatch_us_median", rounded(w, 3)},
          {"raw_launch_ex_us_median", rounded(r, 3)},
          {"raw_launch_us_median", rounded(l, 3)},
          {"gemm_dispatch_us_median", rounded(gw_us, 3)},
          {"w4a4_gemm_dispatch_us_median", rounded(g4_us, 3)},
          {"kernels", kernels},
          {"dispatches", size_t(batches) * per_batch}};
}

// A memory-bound op on one shape, with its own random inputs.
struct Workload {
  virtual ~Workload() = default;
  virtual void run() const = 0;
  virtual double bytes() const = 0;  // moved once each: read + written
};

struct DequantizeWorkload : Workload {
  Problem p;
  DequantizeWorkload(int64_t rows, int64_t k, std::mt19937& rng) : p(rows, k, rng) {}
  void run() const override { dequantize(p.args(), nullptr); }
  double bytes() const override { return p.bytes(); }
};

struct QuantizeWorkload : Workload {
  int64_t rows, k;
  DeviceBuffer in, packed, scales;
  QuantizeWorkload(int64_t rows_, int64_t k_, std::mt19937& rng)
      : rows(rows_), k(k_), in(to_device(random_bf16(rows_ * k_, rng))), packed(rows_ * k_ / 2), scales(rows_ * k_ / 16) {}
  void run() const override {
    QuantizeArgs a;
    a.in = in.get();
    a.rows = rows;
    a.k = k;
    a.out = packed.get();
    a.scales = scales.get();
    a.global_scale.value = 1.0f / 2688;  // a static activation scale, as ModelOpt's input_scale
    quantize(a, nullptr);
  }
  double bytes() const override { return double(rows) * k * (2 + 0.5 + 1.0 / 16); }
};

// A fused bench's NVFP4 output: with a static activation scale (as ModelOpt's input_scale), or
// with each row's global scale computed from its values (--per-row).
struct FusedOutput {
  int64_t rows, k;
  bool per_row;
  DeviceBuffer packed, scales, global_scales;
  FusedOutput(int64_t rows_, int64_t k_, bool per_row_)
      : rows(rows_), k(k_), per_row(per_row_), packed(rows_ * k_ / 2), scales(rows_ * k_ / 16),
        global_scales(per_row_ ? rows_ * 4 : 4) {}
  QuantizedOutput get() const {
    QuantizedOutput o;
    o.data = packed.get();
    o.scales = scales.get();
    if (per_row) {
      o.scale_mode = GlobalScaleMode::compute_per_row;
      o.global_scale_out = global_scales.as<float>();
    } else {
      o.global_scale.value = 1.0f / 2688;
    }
    return o;
  }
  // E2M1 and E4M3 bytes written, and the computed global scales
  double bytes() const { return double(rows) * k * (0.5 + 1.0 / 16) + (per_row ? double(rows) * 4 : 0.0); }
};

// MoE staging of decode and prefill tokens: BF16 rows quantized with a static scale, and each
// row's 8 router ids (int32) and weights copied beside them.
struct MoeStageWorkload : Workload {
  static constexpr int64_t kTopk = 8;
  int64_t rows, k;
  DeviceBuffer in;
  FusedOutput out;
  DeviceBuffer ids, weights, ids_out, weights_out;
  MoeStageWorkload(int64_t rows_, int64_t k_, bool per_row, std::mt19937& rng)
      : rows(rows_), k(k_), in(to_device(random_bf16(rows_ * k_, rng))), out(rows_, k_, per_row),
        ids(to_device(std::vector<int32_t>(size_t(rows_ * kTopk), 3))), weights(to_device(std::vector<float>(size_t(rows_ * kTopk), 0.125f))),
        ids_out(rows_ * kTopk * 4), weights_out(rows_ * kTopk * 4) {}
  void run() const override {
    MoeStageArgs a;
    a.tokens = in.get();
    a.rows = rows;
    a.k = k;
    a.out = out.get();
    a.topk = kTopk;
    a.topk_ids = ids.get();
    a.topk_weights = weights.as<float>();
    a.topk_ids_out = ids_out.get();
    a.topk_weights_out = weights_out.as<float>();
    moe_stage(a, nullptr);
  }
  double bytes() const override { return double(rows) * k * 2 + double(rows) * kTopk * 16 + out.bytes(); }
};

const char* dtype_label(DType dtype) { return dtype == DType::fp16 ? "FP16" : dtype == DType::fp32 ? "FP32" : "BF16"; }

// `n` random values of a 16-bit dtype (bf16, fp16) or fp32 (BF16 values widened), as bytes.
std::vector<uint8_t> random_values(DType dtype, size_t n, std::mt19937& rng) {
  const std::vector<uint16_t> h = dtype == DType::fp16 ? random_fp16(n, rng) : random_bf16(n, rng);
  std::vector<uint8_t> bytes(n * (dtype == DType::fp32 ? 4 : 2));
  if (dtype != DType::fp32) {
    std::memcpy(bytes.data(), h.data(), bytes.size());
  } else {
    for (size_t i = 0; i < n; ++i) {
      const uint32_t f = uint32_t(h[i]) << 16;
      std::memcpy(&bytes[i * 4], &f, 4);
    }
  }
  return bytes;
}

// RMSNorm + quantize with a static activation scale: the weight [k] (the input's dtype, or
// fp32) is shared by every row and stays in L2, so the bytes are those of quantize.
struct RmsNormQuantizeWorkload : Workload {
  int64_t rows, k;
  DType dtype;
  bool weight_fp32;
  DeviceBuffer in, weight;
  FusedOutput out;
  RmsNormQuantizeWorkload(int64_t rows_, int64_t k_, DType dtype_, bool weight_fp32_, bool per_row, std::mt19937& rng)
      : rows(rows_), k(k_), dtype(dtype_), weight_fp32(weight_fp32_), in(to_device(random_values(dtype_, size_t(rows_ * k_), rng))),
        weight(to_device(random_values(weight_fp32_ ? DType::fp32 : dtype_, size_t(k_), rng))), out(rows_, k_, per_row) {}
  void run() const override {
    RmsNormQuantizeArgs a;
    a.in = in.get();
    a.in_dtype = dtype;
    a.rows = rows;
    a.k = k;
    a.weight = weight.get();
    a.weight_fp32 = weight_fp32;
    a.out = out.get();
    rmsnorm_quantize(a, nullptr);
  }
  double bytes() const override { return double(rows) * k * (dtype == DType::fp32 ? 4 : 2) + out.bytes(); }
};

// SwiGLU + quantize of an MoE or MLP down projection's input: gate and up as the two halves
// of a [rows, 2k] BF16 tensor in, k values per row out.
struct SwigluQuantizeWorkload : Workload {
  int64_t rows, k;
  DType dtype;
  DeviceBuffer in;
  FusedOutput out;
  SwigluQuantizeWorkload(int64_t rows_, int64_t k_, DType dtype_, bool per_row, std::mt19937& rng)
      : rows(rows_), k(k_), dtype(dtype_), in(to_device(random_values(dtype_, size_t(rows_ * 2 * k_), rng))),
        out(rows_, k_, per_row) {}
  void run() const override {
    SwigluQuantizeArgs a;
    a.in = in.get();
    a.in_dtype = dtype;
    a.rows = rows;
    a.k = k;
    a.out = out.get();
    swiglu_quantize(a, nullptr);
  }
  double bytes() const override { return double(rows) * k * 4 + out.bytes(); }
};

// mHC pre-block + RMSNorm + quantize (DeepSeek-V4: four streams, fp32 RMSNorm weight): X [rows,
// 4, k] BF16 and the mixing weights [rows, 4] in, k values per row out; the weight stays in L2.
struct MhcRmsNormQuantizeWorkload : Workload {
  static constexpr int64_t kStreams = 4;
  int64_t rows, k;
  DeviceBuffer in, mix, weight;
  FusedOutput out;
  MhcRmsNormQuantizeWorkload(int64_t rows_, int64_t k_, bool per_row, std::mt19937& rng)
      : rows(rows_), k(k_), in(to_device(random_bf16(rows_ * kStreams * k_, rng))),
        mix(to_device(std::vector<float>(size_t(rows_ * kStreams), 0.25f))), weight(to_device(std::vector<float>(size_t(k_), 1.0f))),
        out(rows_, k_, per_row) {}
  void run() const override {
    MhcRmsNormQuantizeArgs a;
    a.in = in.get();
    a.rows = rows;
    a.n_hc = kStreams;
    a.k = k;
    a.mix = mix.as<float>();
    a.weight = weight.get();
    a.weight_fp32 = true;
    a.out = out.get();
    mhc_rmsnorm_quantize(a, nullptr);
  }
  double bytes() const override { return double(rows) * k * 2 * kStreams + double(rows) * kStreams * 4 + out.bytes(); }
};

// Times `make(rows, k)` workloads side by side with a device-to-device copy of as many bytes.
// The rows x K a bandwidth bench times: --m and --k (defaults 8192, 4096, 16, 1 rows of 8192),
// or without either the table of docs/perf.md.
using RowSizes = std::vector<std::pair<int64_t, int64_t>>;
RowSizes row_sizes(std::vector<int64_t> ms, std::vector<int64_t> ks) {
  if (ms.empty() && ks.empty()) return {{8192, 8192}, {4096, 8192}, {16, 8192}, {1, 8192}, {4096, 4096}, {1, 4096}};
  if (ms.empty()) ms = {8192, 4096, 16, 1};
  if (ks.empty()) ks = {8192};
  RowSizes sizes;
  for (int64_t k : ks)
    for (int64_t m : ms) sizes.push_back({m, k});
  return sizes;
}

template <class Make>
Json bandwidth_bench(const char* title, bool quick, const RowSizes& sizes, Make make) {
  std::mt19937 rng(std::random_device{}());
  EventTimer timer;
  const int runs = quick ? 10 : 50;
  Json json = Json::array();
  std::printf("bench %s (median of %d runs, inputs rotated past L2)\n", title, runs);
  std::printf("  %6s %6s %10s %10s %10s %10s %8s\n", "M", "K", "bytes", "ours us", "GB/s", "copy GB/s", "ratio");
  for (auto [rows, k] : sizes) {
    std::vector<std::unique_ptr<Workload>> sets;
    sets.push_back(make(rows, k, rng));
    const double bytes = sets[0]->bytes();
    const int copies = std::clamp(int(128e6 / bytes), 1, 64);  // enough to cycle past the 50 MB L2
    while (int(sets.size()) < copies) sets.push_back(make(rows, k, rng));
    const size_t copy_bytes = size_t(bytes / 2);
    std::vector<DeviceBuffer> src, dst;
    for (int i = 0; i < copies; ++i) src.emplace_back(copy_bytes), dst.emplace_back(copy_bytes);
    for (const auto& w : sets) w->run();  // warm-up: kernels loaded
    std::vector<double> ours, copy;
    for (int i = 0; i < runs; ++i) {
      timer.start(nullptr);
      sets[i % copies]->run();
      ours.push_back(timer.stop_ms(nullptr) * 1e3);
      timer.start(nullptr);
      check_cu(driver().cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(dst[i % copies].get()),
                                          reinterpret_cast<CUdeviceptr>(src[i % copies].get()), copy_bytes, nullptr),
               "cuMemcpyDtoDAsync");
      copy.push_back(timer.stop_ms(nullptr) * 1e3);
    }
    const double us = median(ours), cus = median(copy);
    const double gbs = bytes / us / 1e3, cgbs = 2.0 * copy_bytes / cus / 1e3;
    std::printf("  %6lld %6lld %10.0f %10.2f %10.0f %10.0f %7.0f%%\n", (long long)rows, (long long)k, bytes, us, gbs, cgbs,
                100 * gbs / cgbs);
    json.push_back({{"m", rows}, {"k", k}, {"bytes", std::llround(bytes)}, {"us", rounded(us, 3)}, {"gbps", rounded(gbs, 1)},
                    {"copy_us", rounded(cus, 3)}, {"copy_gbps", rounded(cgbs, 1)}});
  }
  return json;
}

}  // namespace

int cmd_bench(const Args& args) {
  const std::vector<std::string> benchmarks = {"core",        "dequantize",           "quantize",  "rmsnorm-quantize", "swiglu-quantize",
                                               "mhc-rmsnorm-quantize", "moe-stage", "gemm", "grouped"};
  const std::string listed = fmt::format("{}", fmt::join(benchmarks, ", "));
  if (args.positional().size() != 1) throw UsageError(fmt::format("expected one of: {}", listed));
  const std::string what = args.positional()[0];
  if (std::find(benchmarks.begin(), benchmarks.end(), what) == benchmarks.end())
    throw UsageError(fmt::format("unknown benchmark `{}` (one of: {}){}", what, listed, did_you_mean(what, benchmarks)));
  // The GEMM filter is checked before the GPU is looked for, so a typo is a usage error anywhere.
  GemmBenchFilter only;
  GroupedBenchFilter grouped;
  if (args.has("--shape") && what != "gemm" && what != "grouped") throw UsageError("--shape is for `bench gemm` and `bench grouped`");
  const bool bandwidth = what != "core" && what != "gemm" && what != "grouped";
  if (args.has("--m") && what != "gemm" && !bandwidth) throw UsageError("--m is for `bench gemm` and the bandwidth benches");
  if (args.has("--k") && !bandwidth) throw UsageError("--k is for the bandwidth benches (dequantize and the quantizers)");
  for (const std::string& shape : args.all("--shape"))
    (what == "grouped" ? grouped.weights : only.weights).push_back(detail::parse_shape(shape));
  for (const detail::WeightShape& w : only.weights)
    if (w.groups != 1) throw UsageError(fmt::format("--shape {},{},{}: experts are for `bench grouped`", w.n, w.k, w.groups));
  // comma-separated positive integers, from every use of `flag`
  auto positive_list = [&](const char* flag, const char* what_it_is) {
    std::vector<int64_t> values;
    for (const std::string& list : args.all(flag))
      for (const std::string& m : split(list, ',')) {
        size_t used = 0;
        long long v = 0;
        try {
          v = std::stoll(m, &used);
        } catch (const std::exception&) {
        }
        if (used != m.size() || v < 1) throw UsageError(fmt::format("{} {}: {} is a positive integer", flag, m, what_it_is));
        values.push_back(v);
      }
    return values;
  };
  only.ms = positive_list("--m", "M");
  const RowSizes sizes = row_sizes(only.ms, positive_list("--k", "K"));
  for (auto [m, k] : sizes)
    if (bandwidth && k % 32) throw UsageError(fmt::format("--k {}: a multiple of 32", k));
  for (const char* flag : {"--expected-m", "--tokens", "--topk"})
    if (args.has(flag) && what != "grouped") throw UsageError(fmt::format("{} is for `bench grouped`", flag));
  grouped.expected_ms = positive_list("--expected-m", "expected_m");
  grouped.tokens = positive_list("--tokens", "a token count");
  int64_t topk = grouped.topk;
  if (args.has("--topk")) {
    const std::vector<int64_t> counts = positive_list("--topk", "experts a token is routed to");
    if (counts.size() != 1 || grouped.weights.empty()) throw UsageError("--topk takes one count, for the experts of --shape N,K,G");
    topk = counts[0];
  }
  // what the bench's prepack, moe_route and GEMM would refuse only after the experts are built
  for (const detail::WeightShape& w : grouped.weights) {
    const std::string shape = fmt::format("--shape {},{},{}", w.n, w.k, w.groups);
    if (w.groups < 2) throw UsageError(fmt::format("--shape {},{}: give the experts too (N,K,G)", w.n, w.k));
    if (w.groups > detail::kMoeRouteMaxGroups)
      throw UsageError(fmt::format("{}: at most {} experts (moe_route's)", shape, detail::kMoeRouteMaxGroups));
    if (w.k % 32) throw UsageError(fmt::format("{}: K must be a multiple of 32 (the GEMM's)", shape));
    if (w.groups < topk)
      throw UsageError(fmt::format("{}: {} experts, fewer than the {} each token is routed to{}", shape, w.groups, topk,
                                   args.has("--topk") ? "" : " (--topk, default 8)"));
  }
  grouped.topk = int(topk);
  if (args.has("--in-dtype") && what != "swiglu-quantize" && what != "rmsnorm-quantize")
    throw UsageError("--in-dtype is for `bench swiglu-quantize` and `bench rmsnorm-quantize`");
  const std::string in_dtype = args.has("--in-dtype") ? args.get("--in-dtype") : "bf16";
  if (in_dtype != "bf16" && in_dtype != "fp16" && !(in_dtype == "fp32" && what == "rmsnorm-quantize"))
    throw UsageError(fmt::format("--in-dtype {}: bf16 or fp16 (fp32 too for rmsnorm-quantize)", in_dtype));
  const DType bench_dtype = in_dtype == "fp16" ? DType::fp16 : in_dtype == "fp32" ? DType::fp32 : DType::bf16;
  if (args.has("--weight-fp32") && what != "rmsnorm-quantize") throw UsageError("--weight-fp32 is for `bench rmsnorm-quantize`");
  const bool weight_fp32 = args.has("--weight-fp32");
  const bool per_row = args.has("--per-row");
  if (per_row && what != "rmsnorm-quantize" && what != "swiglu-quantize" && what != "mhc-rmsnorm-quantize" && what != "moe-stage")
    throw UsageError("--per-row is for `bench rmsnorm-quantize`, `swiglu-quantize`, `mhc-rmsnorm-quantize` and `moe-stage`");
  const char* scale_label = per_row ? "global scale per row" : "given global scale";
  std::string why;
  if (!use_primary_context(0, &why)) {
    std::fprintf(stderr, "nvfp4-jit bench: needs a GPU: %s\n", why.c_str());
    return kNoGpu;
  }
  const bool quick = args.has("--quick");
  Json json;
  if (what == "core") {
    json = bench_core(quick);
  } else if (what == "gemm") {
    json = bench_gemm(quick, only);
  } else if (what == "grouped") {
    json = bench_grouped(quick, grouped);
  } else if (what == "dequantize") {
    json = bandwidth_bench("dequantize: NVFP4 -> BF16, linear scales", quick, sizes, [](int64_t m, int64_t k, std::mt19937& rng) {
      return std::unique_ptr<Workload>(new DequantizeWorkload(m, k, rng));
    });
  } else if (what == "swiglu-quantize") {
    const std::string title = fmt::format("swiglu-quantize: {} gate | up -> silu(gate) * up -> NVFP4, linear scales, {}",
                                          dtype_label(bench_dtype), scale_label);
    json = bandwidth_bench(title.c_str(), quick, sizes, [&](int64_t m, int64_t k, std::mt19937& rng) {
      return std::unique_ptr<Workload>(new SwigluQuantizeWorkload(m, k, bench_dtype, per_row, rng));
    });
  } else if (what == "mhc-rmsnorm-quantize") {
    const std::string title = fmt::format(
        "mhc-rmsnorm-quantize: BF16 [M, 4, K] mixed by fp32 [M, 4] -> RMSNorm (fp32 weight) -> NVFP4, linear scales, {}",
        scale_label);
    json = bandwidth_bench(title.c_str(), quick, sizes, [&](int64_t m, int64_t k, std::mt19937& rng) {
      return std::unique_ptr<Workload>(new MhcRmsNormQuantizeWorkload(m, k, per_row, rng));
    });
  } else if (what == "rmsnorm-quantize") {
    const std::string title =
        fmt::format("rmsnorm-quantize: {} -> RMSNorm ({} weight) -> NVFP4, linear scales, {}", dtype_label(bench_dtype),
                    dtype_label(weight_fp32 ? DType::fp32 : bench_dtype), scale_label);
    json = bandwidth_bench(title.c_str(), quick, sizes, [&](int64_t m, int64_t k, std::mt19937& rng) {
      return std::unique_ptr<Workload>(new RmsNormQuantizeWorkload(m, k, bench_dtype, weight_fp32, per_row, rng));
    });
  } else if (what == "moe-stage") {
    const std::string title =
        fmt::format("moe-stage: BF16 tokens -> NVFP4 and 8 router ids and weights copied, linear scales, {}", scale_label);
    json = bandwidth_bench(title.c_str(), quick, sizes, [&](int64_t m, int64_t k, std::mt19937& rng) {
      return std::unique_ptr<Workload>(new MoeStageWorkload(m, k, per_row, rng));
    });
  } else {
    json = bandwidth_bench("quantize: BF16 -> NVFP4, linear scales, given global scale", quick, sizes,
                           [](int64_t m, int64_t k, std::mt19937& rng) {
                             return std::unique_ptr<Workload>(new QuantizeWorkload(m, k, rng));
                           });
  }
  if (args.has("--out")) {
    std::ofstream(args.get("--out")) << dump(json) << "\n";
  }
  return kOk;
}

}  // namespace nvfp4::jit::cli
