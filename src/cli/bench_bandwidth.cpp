// nvfp4-jit bench dequantize and the quantizers: memory-bound ops against a device copy of as
// many bytes, each on its own random inputs, rotated past L2.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>

#include <fmt/format.h>

#include "cli/bench_util.hpp"
#include "cli/benches.hpp"
#include "core/launcher.hpp"
#include "nvfp4/jit.hpp"

namespace nvfp4::jit::cli {

using namespace detail;

namespace {

// A memory-bound op on one shape, with its own random inputs.
struct Workload {
  virtual ~Workload() = default;
  virtual void run() const = 0;
  virtual double bytes() const = 0;  // moved once each: read + written
};

struct DequantizeWorkload : Workload {
  DequantizeProblem p;
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

RowSizes row_sizes(std::vector<int64_t> ms, std::vector<int64_t> ks) {
  if (ms.empty() && ks.empty()) return {{8192, 8192}, {4096, 8192}, {16, 8192}, {1, 8192}, {4096, 4096}, {1, 4096}};
  if (ms.empty()) ms = {8192, 4096, 16, 1};
  if (ks.empty()) ks = {8192};
  RowSizes sizes;
  for (int64_t k : ks)
    for (int64_t m : ms) sizes.push_back({m, k});
  return sizes;
}

Json bench_bandwidth(const std::string& what, bool quick, const RowSizes& sizes, const BandwidthOptions& options) {
  const char* scale_label = options.per_row ? "global scale per row" : "given global scale";
  if (what == "dequantize") {
    return bandwidth_bench("dequantize: NVFP4 -> BF16, linear scales", quick, sizes, [](int64_t m, int64_t k, std::mt19937& rng) {
      return std::unique_ptr<Workload>(new DequantizeWorkload(m, k, rng));
    });
  } else if (what == "swiglu-quantize") {
    const std::string title = fmt::format("swiglu-quantize: {} gate | up -> silu(gate) * up -> NVFP4, linear scales, {}",
                                          dtype_label(options.in_dtype), scale_label);
    return bandwidth_bench(title.c_str(), quick, sizes, [&](int64_t m, int64_t k, std::mt19937& rng) {
      return std::unique_ptr<Workload>(new SwigluQuantizeWorkload(m, k, options.in_dtype, options.per_row, rng));
    });
  } else if (what == "mhc-rmsnorm-quantize") {
    const std::string title = fmt::format(
        "mhc-rmsnorm-quantize: BF16 [M, 4, K] mixed by fp32 [M, 4] -> RMSNorm (fp32 weight) -> NVFP4, linear scales, {}",
        scale_label);
    return bandwidth_bench(title.c_str(), quick, sizes, [&](int64_t m, int64_t k, std::mt19937& rng) {
      return std::unique_ptr<Workload>(new MhcRmsNormQuantizeWorkload(m, k, options.per_row, rng));
    });
  } else if (what == "rmsnorm-quantize") {
    const std::string title =
        fmt::format("rmsnorm-quantize: {} -> RMSNorm ({} weight) -> NVFP4, linear scales, {}", dtype_label(options.in_dtype),
                    dtype_label(options.weight_fp32 ? DType::fp32 : options.in_dtype), scale_label);
    return bandwidth_bench(title.c_str(), quick, sizes, [&](int64_t m, int64_t k, std::mt19937& rng) {
      return std::unique_ptr<Workload>(new RmsNormQuantizeWorkload(m, k, options.in_dtype, options.weight_fp32, options.per_row, rng));
    });
  } else if (what == "moe-stage") {
    const std::string title =
        fmt::format("moe-stage: BF16 tokens -> NVFP4 and 8 router ids and weights copied, linear scales, {}", scale_label);
    return bandwidth_bench(title.c_str(), quick, sizes, [&](int64_t m, int64_t k, std::mt19937& rng) {
      return std::unique_ptr<Workload>(new MoeStageWorkload(m, k, options.per_row, rng));
    });
  } else {
    return bandwidth_bench("quantize: BF16 -> NVFP4, linear scales, given global scale", quick, sizes,
                           [](int64_t m, int64_t k, std::mt19937& rng) {
                             return std::unique_ptr<Workload>(new QuantizeWorkload(m, k, rng));
                           });
  }
}

}  // namespace nvfp4::jit::cli
