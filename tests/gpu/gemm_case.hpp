// One GEMM case on the GPU against a float64 reference of the decoded values (shared by the
// GEMM suites of every backend): fresh random data, poisoned outputs (NaN bytes) so every
// element must be written, padded strides left untouched, the relative Frobenius error
// bounded by the output type's rounding; the first wrong element is named.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <random>

#include "../dequantize_fixture.hpp"
#include "gemm_output.hpp"
#include "common/nvfp4_format.cuh"
#include "core/gpu_util.hpp"
#include "core/launcher.hpp"
#include "ops/gemm/dispatch.hpp"
#include "ops/gemm/gemm.hpp"
#include "ops/gemm/sm90/tiles.hpp"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;

namespace {

struct Case {
  int64_t m, n, k;
  DType a = DType::bf16, d = DType::bf16;
  ScaleLayout layout = ScaleLayout::linear;
  bool device_gscale = false;
  int bias = 0;  // 0 none, 1 bf16, 2 fp32
  int64_t a_pad = 0, d_pad = 0;
  float alpha = 1.0f;
  // any: every finite E4M3 scale; subnormal: only nonzero subnormal scales (a kernel that
  // flushed them would be far off); nan_row: one NaN scale, whose row of D must be NaN
  enum Scales { any, subnormal, nan_row } scales = any;
  // W4A4 (a = nvfp4): A's global scale 0 host value, 1 device scalar, 2 device per row; and
  // whether the caller passes the workspace (else gemm allocates it on the stream)
  int a_gscale = 0;
  bool workspace = false;
  // also prepack the weight (GPU, checked against the CPU prepack) and run the gemm on it:
  // every output byte must equal the gemm's on the weight as stored
  bool prepacked = false;
  // a tile to run instead of the heuristic's (block_m 0: the heuristic's)
  sm90::Tile tile{};
  // W4A4: bytes of padding after each packed row of A (4: rows not 16-byte aligned)
  int64_t a_fp4_pad = 16;
  // a tile of another backend's to run instead of the heuristic's (block_m 0: none)
  GemmTile backend_tile{};
  // the weight's packed values and scales written at the start of these buffers instead of
  // fresh ones: cases in turn put their weights at one address, as an allocator hands a freed
  // block out again (each call must read its own weight: no descriptor of an earlier one)
  DeviceBuffer* weight_values = nullptr;
  DeviceBuffer* weight_scales = nullptr;
};

void run_gemm(const Case& c, const GemmArgs& g) {
  sm90::Tile tile = c.tile;
  // three consumers run on a prepacked weight only; the weight as stored takes two, which
  // give the same bits (each output's k order does not depend on the consumer count)
  if (tile.consumers == 3 && !g.b_prepacked) tile.consumers = 2;
  if (c.backend_tile.block_m)
    gemm_with_tile(g, c.backend_tile, nullptr);
  else if (tile.block_m)
    gemm_with_tile(g, sm90::to_config(tile), nullptr);
  else
    gemm(g, nullptr);
}

uint16_t to_half_bits(DType t, float v) {
  return t == DType::bf16 ? nvfp4k::float_to_bf16_bits(v) : nvfp4k::float_to_fp16_bits(v);
}
// ref[m, n] = alpha * gw * sum_k a[m, k] * w[n, k] + bias[n], in float64 over all cores.
std::vector<double> reference(const Case& c, const std::vector<double>& a, const std::vector<double>& w, double gw,
                              const std::vector<double>& bias) {
  std::vector<double> ref(size_t(c.m * c.n));
  testutil::on_all_cores([&](unsigned t, unsigned threads) {
    for (int64_t m = t; m < c.m; m += threads)
      for (int64_t n = 0; n < c.n; ++n) {
        const double* ar = &a[size_t(m * c.k)];
        const double* wr = &w[size_t(n * c.k)];
        double s = 0;
        for (int64_t k = 0; k < c.k; ++k) s += ar[k] * wr[k];
        ref[size_t(m * c.n + n)] = c.alpha * gw * s + (bias.empty() ? 0.0 : bias[size_t(n)]);
      }
  });
  return ref;
}

// The weight of `g` prepacked on the GPU (bit-identical with the CPU prepack), and the gemm of
// `g` on it (bit-identical with `expected`, the gemm on the weight as stored).
bool check_prepacked(const Case& c, GemmArgs g, const testutil::HostNvfp4& w, const std::vector<uint8_t>& expected) {
  const int64_t bytes = prepacked_bytes(c.n, c.k);
  DeviceBuffer d_pre{size_t(bytes)}, d_out{expected.size()};
  d_pre.fill(0xA5);
  d_out.fill(0xFF);
  prepack({g.b, c.n, c.k, d_pre.get()}, nullptr);
  std::vector<uint8_t> cpu_pre(static_cast<size_t>(bytes)), gpu_pre(static_cast<size_t>(bytes));
  PrepackArgs host{{w.packed.data(), 0, w.scales.data(), c.layout, {}}, c.n, c.k, cpu_pre.data()};
  cpu::prepack(host);
  g.b = {d_pre.get(), 0, nullptr, ScaleLayout::linear, g.b.global_scale};
  g.b_prepacked = true;
  g.d = d_out.get();
  run_gemm(c, g);
  check_cu(driver().cuCtxSynchronize(), "prepack + gemm");
  d_pre.download(gpu_pre.data(), gpu_pre.size());
  std::vector<uint8_t> got(expected.size());
  d_out.download(got.data(), got.size());
  const auto pre = std::mismatch(gpu_pre.begin(), gpu_pre.end(), cpu_pre.begin());
  if (pre.first != gpu_pre.end()) {
    FAIL_CHECK("m=" << c.m << " n=" << c.n << " k=" << c.k << ": GPU prepack differs from the CPU's at byte "
                    << (pre.first - gpu_pre.begin()));
    return false;
  }
  const auto out = std::mismatch(got.begin(), got.end(), expected.begin());
  if (out.first != got.end()) {
    const int64_t element = (out.first - got.begin()) / (c.d == DType::fp32 ? 4 : 2);
    const int64_t ldd = g.d_row_stride ? g.d_row_stride : c.n;
    FAIL_CHECK("m=" << c.m << " n=" << c.n << " k=" << c.k << ": gemm on the prepacked weight differs first at ("
                    << element / ldd << ", " << element % ldd << ")");
    return false;
  }
  return true;
}

void run_case(const Case& c, std::mt19937& rng) {
  CAPTURE(c.m);
  CAPTURE(c.n);
  CAPTURE(c.k);
  testutil::HostNvfp4 w(c.n, c.k, c.layout, rng);
  if (c.scales == Case::subnormal)
    for (int64_t n = 0; n < c.n; ++n)
      for (int64_t b = 0; b < c.k / 16; ++b) w.scales[size_t(w.offset(n, b))] = uint8_t(1 + rng() % 7);
  const int64_t nan_row = c.scales == Case::nan_row ? int64_t(rng() % uint64_t(c.n)) : -1;
  if (nan_row >= 0) w.scales[size_t(w.offset(nan_row, int64_t(rng() % uint64_t(c.k / 16))))] = 0x7F;
  std::vector<double> wd(size_t(c.n * c.k));
  for (int64_t n = 0; n < c.n; ++n)
    for (int64_t k = 0; k < c.k; ++k) wd[size_t(n * c.k + k)] = n == nan_row ? NAN : w.value(n, k);
  const double gw = std::ldexp(1.0 + (rng() % 100) / 100.0, -12);

  const int64_t lda = c.k + c.a_pad, ldd = c.n + c.d_pad;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> a(size_t(c.m * lda), 0x7FFF);  // padding: NaN, must never be read
  std::vector<double> ad(size_t(c.m * c.k));
  const bool w4a4 = c.a == DType::nvfp4;
  // W4A4: A in the other scale layout than B, padded rows, any finite scale (subnormals too)
  const ScaleLayout a_layout = c.layout == ScaleLayout::linear ? ScaleLayout::swizzled128x4 : ScaleLayout::linear;
  testutil::HostNvfp4 a4(w4a4 ? c.m : 0, c.k, a_layout, rng, c.a_fp4_pad);
  const float ga = std::ldexp(1.0f + (rng() % 100) / 100.0f, -3);
  for (int64_t m = 0; m < c.m; ++m)
    for (int64_t k = 0; k < c.k; ++k) {
      if (w4a4) {
        ad[size_t(m * c.k + k)] = a4.value(m, k) * (c.a_gscale == 2 ? double(a4.row_scales[size_t(m)]) : double(ga));
        continue;
      }
      const uint16_t h = to_half_bits(c.a, normal(rng));
      a[size_t(m * lda + k)] = h;
      ad[size_t(m * c.k + k)] = testutil::half_bits_to_double(c.a, h);
    }
  std::vector<double> bias_d;
  std::vector<uint8_t> bias_bytes;
  if (c.bias) {
    bias_d.resize(size_t(c.n));
    bias_bytes.resize(size_t(c.n) * (c.bias == 1 ? 2 : 4));
    for (int64_t n = 0; n < c.n; ++n) {
      const float v = normal(rng);
      if (c.bias == 1) {
        const uint16_t h = nvfp4k::float_to_bf16_bits(v);
        std::memcpy(&bias_bytes[size_t(n) * 2], &h, 2);
        bias_d[size_t(n)] = nvfp4k::bf16_bits_to_float(h);
      } else {
        std::memcpy(&bias_bytes[size_t(n) * 4], &v, 4);
        bias_d[size_t(n)] = v;
      }
    }
  }

  const int esize = c.d == DType::fp32 ? 4 : 2;
  DeviceBuffer d_a = to_device(a), d_w = to_device(w.packed), d_s = to_device(w.scales);
  DeviceBuffer d_gw = to_device(std::vector<float>{float(gw)});
  DeviceBuffer d_bias = c.bias ? to_device(bias_bytes) : DeviceBuffer(16);
  DeviceBuffer d_out(size_t(c.m * ldd * esize));
  d_out.fill(0xFF);  // NaN in every output type

  GemmArgs g;
  g.m = c.m, g.n = c.n, g.k = c.k;
  g.a = d_a.get(), g.a_dtype = c.a, g.a_row_stride = lda;
  DeviceBuffer d_a4 = to_device(a4.packed), d_a4s = to_device(a4.scales), d_ga = to_device(std::vector<float>{ga}),
               d_ga_rows = to_device(a4.row_scales), d_ws(size_t(c.m * c.k * 2));
  if (w4a4) {
    g.a = nullptr, g.a_row_stride = 0;
    g.a_fp4 = {d_a4.get(), a4.stride_bytes, d_a4s.get(), a_layout, {ga, nullptr, false}};
    if (c.a_gscale == 1) g.a_fp4.global_scale.device_ptr = d_ga.as<float>();
    if (c.a_gscale == 2) g.a_fp4.global_scale = {1.0f, d_ga_rows.as<float>(), true};
    if (c.workspace) g.workspace = d_ws.get(), g.workspace_bytes = int64_t(d_ws.bytes());
  }
  void* w_values = d_w.get();
  void* w_scales = d_s.get();
  if (c.weight_values) {
    REQUIRE(c.weight_values->bytes() >= w.packed.size());
    REQUIRE(c.weight_scales->bytes() >= w.scales.size());
    c.weight_values->upload(w.packed.data(), w.packed.size());
    c.weight_scales->upload(w.scales.data(), w.scales.size());
    w_values = c.weight_values->get();
    w_scales = c.weight_scales->get();
  }
  g.b = {w_values, 0, w_scales, c.layout, {}};
  if (c.device_gscale)
    g.b.global_scale.device_ptr = d_gw.as<float>();
  else
    g.b.global_scale.value = float(gw);
  g.d = d_out.get(), g.d_dtype = c.d, g.d_row_stride = ldd;
  if (c.bias) g.bias = d_bias.get(), g.bias_dtype = c.bias == 1 ? DType::bf16 : DType::fp32;
  g.alpha = c.alpha;
  run_gemm(c, g);
  check_cu(driver().cuCtxSynchronize(), "gemm kernel");
  std::vector<uint8_t> got(d_out.bytes());
  d_out.download(got.data(), got.size());
  if (c.prepacked && !check_prepacked(c, g, w, got)) return;

  const std::vector<double> ref = reference(c, ad, wd, gw, bias_d);
  double err2 = 0, ref2 = 0;
  for (int64_t m = 0; m < c.m; ++m)
    for (int64_t n = 0; n < ldd; ++n) {
      const size_t at = size_t(m * ldd + n) * esize;
      if (n >= c.n) {  // padding: untouched
        if (got[at] != 0xFF) {
          FAIL_CHECK("m=" << c.m << " n=" << c.n << " k=" << c.k << ": padding element (" << m << ", " << n << ") written");
          return;
        }
        continue;
      }
      const double v = testutil::output_value(c.d, &got[at]);
      const double r = ref[size_t(m * c.n + n)];
      if (n == nan_row) {  // must be a NaN the kernel wrote, not the poison's
        if (!std::isnan(v) || std::all_of(&got[at], &got[at] + esize, [](uint8_t b) { return b == 0xFF; })) {
          FAIL_CHECK("m=" << c.m << " n=" << c.n << " k=" << c.k << ": element (" << m << ", " << n << ") = " << v
                          << ", expected the NaN of row " << nan_row << "'s NaN block scale");
          return;
        }
        continue;
      }
      if (!std::isfinite(v)) {
        FAIL_CHECK("m=" << c.m << " n=" << c.n << " k=" << c.k << ": first unwritten or non-finite element (" << m << ", "
                        << n << ") = " << v << ", expected " << r);
        return;
      }
      err2 += (v - r) * (v - r);
      ref2 += r * r;
    }
  const double rel = std::sqrt(err2 / std::max(ref2, 1e-300));
  // fp32: accumulation only; BF16 / FP16: the output rounding (2^-9 / 2^-12 relative) dominates
  const double bound = c.d == DType::fp32 ? 1e-5 : c.d == DType::bf16 ? 4e-3 : 1e-3;
  MESSAGE("gemm m=" << c.m << " n=" << c.n << " k=" << c.k << " a=" << int(c.a) << " d=" << int(c.d)
                    << " layout=" << int(c.layout) << (c.tile.block_m ? " tile " + sm90::describe(c.tile) : std::string())
                    << (c.backend_tile.block_m ? " tile bm" + std::to_string(c.backend_tile.block_m) + " bn" +
                                                     std::to_string(c.backend_tile.block_n) + " s" +
                                                     std::to_string(c.backend_tile.stages)
                                               : std::string())
                    << ": relative Frobenius error " << rel);
  CHECK_MESSAGE(rel <= bound, "m=" << c.m << " n=" << c.n << " k=" << c.k << ": relative error " << rel << " (bound " << bound << ")");
}

// `cases` in turn with their weights at one address (the start of one buffer for the packed
// values and one for the scales), as an allocator hands a freed block out again. A weight's TMA
// descriptor may be reused while its address and shape are the same (the contents are read at
// run time) and must be encoded again for any other shape there: one kept by address alone
// would read an earlier case's rows or row stride, and its results fail the reference.
void run_at_one_address(std::initializer_list<Case> cases, std::mt19937& rng) {
  size_t values = 0, scales = 0;
  for (const Case& c : cases) {
    values = std::max(values, size_t(c.n * c.k / 2));
    scales = std::max(scales, size_t((c.n + 127) / 128 * 128 * ((c.k / 16 + 3) / 4 * 4)));  // either layout
  }
  DeviceBuffer value_buffer(values), scale_buffer(scales);
  for (Case c : cases) {
    c.weight_values = &value_buffer;
    c.weight_scales = &scale_buffer;
    run_case(c, rng);
  }
}

// Tunes the bucket of M = 5 (M <= 8) with 5 runs a candidate: one result, more than one
// candidate, a winner no slower than the heuristic's tile; said in the log.
TunedBucket tune_bucket_of_m5(const GemmProblem& problem) {
  TuneOptions options;
  options.m = 5;
  options.runs = 5;
  const std::vector<TunedBucket> tuned = tune(problem, options);
  REQUIRE(tuned.size() == 1);
  CHECK(tuned[0].m_bucket == 8);
  CHECK(tuned[0].candidates > 1);
  CHECK(tuned[0].winner_us <= tuned[0].heuristic_us);
  MESSAGE("tuned M<=8 of " << problem.n << "x" << problem.k << " (a " << dtype_name(uint8_t(problem.a_dtype)) << "): heuristic "
                           << tuned[0].heuristic << " " << tuned[0].heuristic_us << " us, winner " << tuned[0].winner << " "
                           << tuned[0].winner_us << " us");
  return tuned[0];
}

// A W4A4 gemm (40 x 200 x 1024, W's global scale on the device) captured in a CUDA graph, then
// replayed `replays` times with that scale changed: each replay's D is the eager call's, scaled.
void check_w4a4_graph_replays(int replays) {
  constexpr DType fp4 = DType::nvfp4, fp32 = DType::fp32;
  constexpr ScaleLayout lin = ScaleLayout::linear, sw = ScaleLayout::swizzled128x4;
  std::mt19937 rng(std::random_device{}());
  const int64_t m = 40, n = 200, k = 1024;
  testutil::HostNvfp4 a(m, k, sw, rng), w(n, k, lin, rng);
  DeviceBuffer a_packed = to_device(a.packed), a_scales = to_device(a.scales), w_packed = to_device(w.packed),
               w_scales = to_device(w.scales), gw = to_device(std::vector<float>{1.0f / 64}), eager(m * n * 4),
               replayed(m * n * 4);
  GemmArgs g;
  g.m = m, g.n = n, g.k = k, g.a_dtype = fp4, g.d_dtype = fp32;
  g.a_fp4 = {a_packed.get(), 0, a_scales.get(), sw, {0.25f, nullptr, false}};
  g.b = {w_packed.get(), 0, w_scales.get(), lin, {1.0f, gw.as<float>(), false}};
  g.d = eager.get();
  const Driver& d = driver();
  CUstream stream = nullptr;
  check_cu(d.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  gemm(g, stream);  // eager: loads the kernel
  check_cu(d.cuStreamSynchronize(stream), "sync");
  g.d = replayed.get();
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  check_cu(d.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture");
  gemm(g, stream);
  check_cu(d.cuStreamEndCapture(stream, &graph), "cuStreamEndCapture");
  check_cu(d.cuGraphInstantiateWithFlags(&exec, graph, 0), "cuGraphInstantiate");
  const float quarter = 1.0f / 256;  // a power of two times the eager scale: the results scale exactly
  gw.upload(&quarter, sizeof quarter);
  for (int replay = 0; replay < replays; ++replay) {
    replayed.fill(0xFF);
    check_cu(d.cuGraphLaunch(exec, stream), "cuGraphLaunch");
    check_cu(d.cuStreamSynchronize(stream), "sync");
    std::vector<float> want(size_t(m * n)), got(size_t(m * n));
    eager.download(want.data(), want.size() * 4);
    replayed.download(got.data(), got.size() * 4);
    for (int64_t i = 0; i < m * n; ++i)
      if (!(got[size_t(i)] == want[size_t(i)] / 4)) {
        FAIL_CHECK("m=40 n=200 k=1024, replay " << replay << ": element (" << i / n << ", " << i % n
                                                << ") = " << got[size_t(i)] << ", expected " << want[size_t(i)] / 4);
        break;
      }
  }
  d.cuGraphExecDestroy(exec);
  d.cuGraphDestroy(graph);
  d.cuStreamDestroy(stream);
}

// Tunes a W4A4 problem (1000 x 4096, M <= 8) on the device's backend: gemm's warm path then
// picks the winner, and a gemm on it is correct.
void check_w4a4_tune_then_gemm() {
  constexpr DType fp4 = DType::nvfp4, fp32 = DType::fp32;
  constexpr ScaleLayout sw = ScaleLayout::swizzled128x4;
  std::mt19937 rng(std::random_device{}());
  GemmProblem problem;
  problem.n = 1000, problem.k = 4096;
  problem.a_dtype = fp4, problem.d_dtype = fp32, problem.a_scale_layout = sw;
  const TunedBucket tuned = tune_bucket_of_m5(problem);
  alignas(16) static unsigned char dummy[16];
  GemmArgs probe;
  probe.m = 5, probe.n = problem.n, probe.k = problem.k, probe.a_dtype = fp4, probe.d_dtype = fp32;
  probe.a_fp4.data = probe.a_fp4.scales = probe.b.data = probe.b.scales = probe.d = dummy;
  probe.a_fp4.scale_layout = sw;
  const GemmBackend& backend = gemm_backend(current_device().arch, "test");
  CHECK(backend.describe(gemm_dispatch(current_device(), gemm_call(probe, "test"), nullptr).spec.tile) == tuned.winner);
  run_case({5, 1000, 4096, fp4, fp32, sw}, rng);
}

}  // namespace
