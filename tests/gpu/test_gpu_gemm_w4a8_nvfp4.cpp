// gemm and grouped_gemm in the W4A8 precision mode (sm_90a) on NVFP4 activations (a_dtype nvfp4):
// our quantize's output of Gaussian rows with outlier channels (global scale per tensor, on the
// host or the device, per row, or per group; linear or swizzled scales), held to float64 of the
// exact NVFP4 product (decoded values times their global scale) under docs/formats.md's W4A8
// error model (w4a8_reference.hpp), and against the BF16-activation W4A8 path on the same values
// decoded to BF16 (dequantize without the global scale: exact): the E4M3 rows must be the same
// bytes, each row scale the BF16 path's times the row's global scale (one fp32 product), and D
// the BF16 path's times the global scale to within the output's rounding. Calls small enough for
// the exact mode run W4A4 (decode + the W4A16 GEMM) and are held to the same.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/scale_layout.cuh"
#include "nvfp4/jit.hpp"
#include "ops/gemm/call.hpp"
#include "ops/gemm/fp8_activations_op.hpp"
#include "w4a8_reference.hpp"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;
using namespace w4a8ref;

namespace {

enum class Gscale { host, device, per_row, per_group };

const char* gscale_name(Gscale g) {
  return g == Gscale::host ? "global scale on the host" : g == Gscale::device ? "global scale on the device"
         : g == Gscale::per_row                                             ? "global scale per row"
                                                                            : "global scale per group";
}

// NVFP4 activations [rows, k] as quantize leaves them (the global scale computed per tensor, or
// per row), on the device and, downloaded, on the host.
struct Fp4Activations {
  int64_t rows = 0, k = 0, stride = 0;  // stride: bytes a row
  ScaleLayout layout = ScaleLayout::linear;
  DeviceBuffer data, scales, gscales;
  std::vector<uint8_t> packed, scale_bytes;
  std::vector<float> gs;  // 1 or rows values
  // value i of row r without the global scale: e2m1 x its block's E4M3 scale
  double decoded(int64_t r, int64_t i) const {
    const uint8_t byte = packed[size_t(r * stride + i / 2)];
    const long long at = layout == ScaleLayout::linear ? nvfp4k::scale_offset_linear(r, i / 16, k / 16)
                                                       : nvfp4k::scale_offset_swizzled128x4(r, i / 16, k / 16);
    return e2m1(i % 2 ? byte >> 4 : byte & 15) * e4m3(scale_bytes[size_t(at)]);
  }
};

Fp4Activations quantized_activations(int64_t rows, int64_t k, ScaleLayout layout, bool per_row, int64_t stride_pad,
                                     std::mt19937& rng) {
  const Activations source = random_activations(rows, k, DType::bf16, false, rng);
  Fp4Activations a;
  a.rows = rows, a.k = k, a.stride = k / 2 + stride_pad, a.layout = layout;
  a.data = DeviceBuffer(size_t(rows * a.stride));
  a.data.fill(0x77);  // the padding between rows: values the pass must not read
  a.scales = DeviceBuffer(size_t(scale_bytes(layout, rows, k)));
  a.gscales = DeviceBuffer(size_t(per_row ? rows : 1) * 4);
  DeviceBuffer in = to_device(source.a);
  QuantizeArgs q;
  q.in = in.get(), q.in_dtype = DType::bf16, q.rows = rows, q.k = k;
  q.out = a.data.get(), q.out_row_stride_bytes = a.stride, q.scales = a.scales.get(), q.scale_layout = layout;
  q.scale_mode = per_row ? GlobalScaleMode::compute_per_row : GlobalScaleMode::compute_per_tensor;
  q.global_scale_out = a.gscales.as<float>();
  quantize(q, nullptr);
  check_cu(driver().cuCtxSynchronize(), "quantize");
  a.packed.resize(a.data.bytes()), a.scale_bytes.resize(a.scales.bytes()), a.gs.resize(a.gscales.bytes() / 4);
  a.data.download(a.packed.data(), a.packed.size());
  a.scales.download(a.scale_bytes.data(), a.scale_bytes.size());
  a.gscales.download(a.gs.data(), a.gs.size() * 4);
  return a;
}

// A call: dense (no counts) or grouped, its rows as grouped_rows lays them out (counts, max_m,
// padding, tokens, bad_row_expert).
struct Fp4Case {
  int64_t m, n, k;  // (m: a dense call's rows)
  ScaleLayout scales = ScaleLayout::linear;
  Gscale gscale = Gscale::host;
  DType d = DType::bf16;
  int64_t stride_pad = 0;  // bytes past k/2 in each row of A
  GroupedLayout layout = GroupedLayout::contiguous;
  std::vector<int32_t> counts{};
  int64_t expected_m = 0, padding = 0, max_m = 0, tokens = 0;
  int bad_row_expert = -1;
};

// D and the workspace of one call, downloaded.
struct Result {
  std::vector<uint8_t> d, workspace;
};

Result run(const GroupedGemmArgs& ga, bool grouped, size_t out_bytes, int64_t workspace_bytes) {
  DeviceBuffer d_out{out_bytes}, workspace{size_t(std::max<int64_t>(workspace_bytes, 16))};
  d_out.fill(0xFF);  // NaN: every element of a routed row must be written, rows of no group keep it
  workspace.fill(0);
  GroupedGemmArgs call = ga;
  call.gemm.d = d_out.get();
  call.gemm.workspace = workspace.get(), call.gemm.workspace_bytes = int64_t(workspace.bytes());
  if (grouped) grouped_gemm(call, nullptr);
  else gemm(call.gemm, nullptr);
  check_cu(driver().cuCtxSynchronize(), grouped ? "grouped_gemm" : "gemm");
  Result r{std::vector<uint8_t>(out_bytes), std::vector<uint8_t>(workspace.bytes())};
  d_out.download(r.d.data(), r.d.size());
  workspace.download(r.workspace.data(), r.workspace.size());
  return r;
}

// The NVFP4 call against the BF16 one on the same decoded values: E4M3 rows byte for byte and row
// scales times `gs` bit for bit (where W4A8 ran), D times gs to within two output roundings.
void check_against_bf16_path(const std::string& label, const std::vector<RowRef>& refs, const std::vector<double>& gs,
                             int64_t n, int64_t k, DType d, bool w4a8, const Result& fp4, const Result& bf16) {
  const int64_t rows = int64_t(refs.size()), esize = d == DType::fp32 ? 4 : 2;
  int64_t checked_rows = 0;
  if (w4a8) {
    const int64_t scales_at = fp8_row_scales_offset(rows, k);
    for (int64_t r = 0; r < rows; ++r) {
      if (refs[size_t(r)].weight < 0) continue;  // (a masked group's rows past its count are not written)
      float s4, s16;
      std::memcpy(&s4, &fp4.workspace[size_t(scales_at + 4 * r)], 4);
      std::memcpy(&s16, &bf16.workspace[size_t(scales_at + 4 * r)], 4);
      if (refs[size_t(r)].source < 0) {
        if (!std::isnan(s4)) FAIL_CHECK(label << ": row " << r << "'s index is outside A but its row scale is " << s4);
        continue;
      }
      const float want = s16 * float(gs[size_t(r)]);
      if (std::memcmp(&s4, &want, 4) != 0) {
        FAIL_CHECK(label << ": row scale " << r << " = " << s4 << ", the BF16 path's " << s16 << " x global scale "
                         << gs[size_t(r)] << " = " << want);
        return;
      }
      const auto* a = &fp4.workspace[size_t(r * k)];
      const auto* b = &bf16.workspace[size_t(r * k)];
      if (std::memcmp(a, b, size_t(k)) != 0) {
        const int64_t i = std::mismatch(a, a + k, b).first - a;
        FAIL_CHECK(label << ": E4M3 row " << r << " byte " << i << " = " << int(a[i]) << ", the BF16 path's " << int(b[i]));
        return;
      }
      ++checked_rows;
    }
  }
  const double unit = d == DType::fp32 ? std::ldexp(1.0, -22) : std::ldexp(1.0, -8);
  double worst = 0;
  int64_t compared = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (refs[size_t(r)].weight < 0 || refs[size_t(r)].source < 0) continue;  // (poison and NaN: check_w4a8_output's)
    for (int64_t j = 0; j < n; ++j) {
      const double a = testutil::output_value(d, &fp4.d[size_t((r * n + j) * esize)]);
      const double b = gs[size_t(r)] * testutil::output_value(d, &bf16.d[size_t((r * n + j) * esize)]);
      const double size = std::max(std::fabs(a), std::fabs(b));
      const double rel = size > 0 ? std::fabs(a - b) / size : 0.0;
      ++compared;
      if (!(rel <= 2 * unit + std::ldexp(1.0, -20))) {
        FAIL_CHECK(label << ": D[" << r << ", " << j << "] = " << a << ", the BF16 path's x global scale " << b);
        return;
      }
      worst = std::max(worst, rel);
    }
  }
  const std::string rows_checked = w4a8 ? std::to_string(checked_rows) + " E4M3 rows the same bytes, their scales its x the "
                                               "global scale bit for bit; "
                                         : std::string("(the exact mode: no E4M3 rows); ");
  MESSAGE(label << ": against the BF16-activation path: " << rows_checked << "D within " << worst
                << " relative of its x the global scale (" << compared << " elements)");
}

void run_fp4_case(const Fp4Case& c, std::mt19937& rng) {
  const bool grouped = !c.counts.empty(), masked = grouped && c.layout == GroupedLayout::masked;
  const int groups = grouped ? int(c.counts.size()) : 1;
  std::vector<Weight> weights;
  for (int e = 0; e < groups; ++e) weights.push_back(random_weight(c.n, c.k, false, rng));
  // the rows of D and where each reads A
  GroupedRows layout;
  if (grouped) {
    layout = grouped_rows(masked, c.counts, c.max_m, c.padding, c.tokens, c.bad_row_expert, rng);
  } else {
    for (int64_t r = 0; r < c.m; ++r) layout.refs.push_back({r, 0});
    layout.sizes = {0};
  }
  const std::vector<RowRef>& refs = layout.refs;
  const std::vector<int32_t>& sizes = layout.sizes;
  const std::vector<int32_t>& row_index = layout.row_index;
  const int64_t routed = layout.routed, rows = int64_t(refs.size());
  const int64_t a_rows = c.tokens > 0 ? c.tokens : rows;
  const Fp4Activations fa = quantized_activations(a_rows, c.k, c.scales, c.gscale == Gscale::per_row, c.stride_pad, rng);
  std::vector<float> group_gs(static_cast<size_t>(groups));
  for (int e = 0; e < groups; ++e) group_gs[size_t(e)] = fa.gs[0] * (0.5f + 0.25f * float(e));
  // each row of D's global scale, and the exact values it multiplies: Activations of D's rows
  std::vector<double> gs(static_cast<size_t>(rows), 1.0);
  Activations act;
  act.x.assign(size_t(rows * c.k), 0.0), act.dx.assign(act.x.size(), 0.0);
  std::vector<RowRef> out_refs = refs;
  for (int64_t r = 0; r < rows; ++r) {
    const RowRef ref = refs[size_t(r)];
    if (ref.weight < 0 || ref.source < 0) continue;
    gs[size_t(r)] = c.gscale == Gscale::per_row     ? fa.gs[size_t(r)]
                    : c.gscale == Gscale::per_group ? group_gs[size_t(ref.weight)]
                                                    : fa.gs[0];
    double amax = 0;
    for (int64_t i = 0; i < c.k; ++i) {
      const double x = fa.decoded(ref.source, i) * gs[size_t(r)];
      act.x[size_t(r * c.k + i)] = x;
      amax = std::max(amax, std::fabs(x));
    }
    const double unit = amax > 0 ? amax / 448 : 1.0;
    for (int64_t i = 0; i < c.k; ++i) act.dx[size_t(r * c.k + i)] = rounding(act.x[size_t(r * c.k + i)], unit);
    out_refs[size_t(r)].source = r;
  }
  Epilogue ep;
  ep.gw = std::ldexp(1.0 + (rng() % 100) / 100.0, -10), ep.d = c.d;

  const int64_t expert_bytes = prepacked_bytes(c.n, c.k);
  DeviceBuffer d_pre{size_t(expert_bytes * groups)};
  d_pre.fill(0xA5);
  for (int e = 0; e < groups; ++e) prepack_checked(weights[size_t(e)], c.n, c.k, d_pre.as<unsigned char>() + e * expert_bytes);
  DeviceBuffer d_sizes = to_device(sizes), d_index = to_device(row_index.empty() ? sizes : row_index);
  DeviceBuffer d_group_gs = to_device(group_gs);
  GroupedGemmArgs ga;
  GemmArgs& g = ga.gemm;
  g.m = !grouped ? c.m : masked ? c.max_m : rows, g.n = c.n, g.k = c.k;
  g.b.data = d_pre.get();
  g.b_prepacked = true;
  g.b.global_scale.value = float(ep.gw);
  g.d_dtype = c.d;
  g.precision = GemmPrecision::w4a8;
  g.a_dtype = DType::nvfp4;
  g.a_fp4.data = fa.data.get(), g.a_fp4.row_stride_bytes = fa.stride, g.a_fp4.scales = fa.scales.get();
  g.a_fp4.scale_layout = c.scales;
  g.a_fp4.global_scale = c.gscale == Gscale::host      ? GlobalScale{fa.gs[0], nullptr, false}
                         : c.gscale == Gscale::per_group ? GlobalScale{0.0f, d_group_gs.as<float>(), false}
                                                         : GlobalScale{0.0f, fa.gscales.as<float>(), c.gscale == Gscale::per_row};
  if (grouped) {
    ga.groups = groups, ga.layout = c.layout, ga.expected_m = c.expected_m;
    (masked ? ga.masked_m : ga.group_ends) = d_sizes.as<int32_t>();
    if (c.tokens > 0) ga.row_index = d_index.as<int32_t>(), ga.a_rows = c.tokens;
    ga.a_global_scale_per_group = c.gscale == Gscale::per_group;
  }
  const GemmCall call = grouped ? grouped_gemm_call(ga, "test", false) : gemm_call(g, "test", false);
  const bool w4a8 = call.args.precision == GemmPrecision::w4a8;
  const size_t out_bytes = size_t(rows * c.n) * (c.d == DType::fp32 ? 4 : 2);
  const Result fp4 = run(ga, grouped, out_bytes, grouped ? grouped_gemm_workspace_bytes(ga) : gemm_workspace_bytes(g));

  std::ostringstream label;
  label << "W4A8 on NVFP4 A, " << (!grouped ? "dense" : masked ? "masked" : c.tokens > 0 ? "contiguous gathered" : "contiguous");
  if (grouped) label << " " << groups << " experts rows=" << routed << " expected_m=" << c.expected_m;
  label << " m=" << rows << " n=" << c.n << " k=" << c.k << ", " << (c.scales == ScaleLayout::linear ? "linear" : "swizzled")
        << " scales, " << gscale_name(c.gscale) << (c.stride_pad ? ", padded rows" : "")
        << (w4a8 ? "" : " (the exact mode runs: W4A4)");
  check_w4a8_output(label.str(), out_refs, act, weights, c.n, c.k, ep, fp4.d);

  // the BF16-activation path on the same values: dequantize without the global scale (exact in BF16)
  DeviceBuffer decoded{size_t(a_rows * c.k * 2)};
  DequantizeArgs dq;
  dq.src = {fa.data.get(), fa.stride, fa.scales.get(), c.scales, {}};
  dq.src_rows = a_rows, dq.k = c.k, dq.out = decoded.get(), dq.out_dtype = DType::bf16;
  dequantize(dq, nullptr);
  GroupedGemmArgs gb = ga;
  gb.gemm.a_dtype = DType::bf16, gb.gemm.a = decoded.get(), gb.gemm.a_fp4 = Nvfp4Tensor{};
  gb.a_global_scale_per_group = false;
  const Result bf16 = run(gb, grouped, out_bytes, grouped ? grouped_gemm_workspace_bytes(gb) : gemm_workspace_bytes(gb.gemm));
  check_against_bf16_path(label.str(), refs, gs, c.n, c.k, c.d, w4a8, fp4, bf16);
}

}  // namespace

TEST_SUITE("gpu_gemm_w4a8_nvfp4") {
  TEST_CASE("gemm W4A8 on NVFP4 activations against float64 of the exact NVFP4 product and the BF16 path") {
    if (current_device().arch != Arch::sm_90a) return;  // (W4A8 is refused elsewhere: gpu_gemm_w4a8)
    std::mt19937 rng(std::random_device{}());
    using S = ScaleLayout;
    const DType bf16 = DType::bf16, fp32 = DType::fp32;
    const Fp4Case cases[] = {
        {300, 1000, 4096, S::linear, Gscale::host, bf16},
        {300, 512, 7168, S::swizzled128x4, Gscale::per_row, fp32, 16},
        {512, 512, 4096, S::swizzled128x4, Gscale::device, fp32},
        {512, 384, 7168, S::linear, Gscale::per_row, bf16},
        {2048, 256, 4096, S::linear, Gscale::device, fp32, 32},
        {2048, 256, 7168, S::swizzled128x4, Gscale::per_row, bf16},
        {257, 64, 96, S::swizzled128x4, Gscale::host, fp32},  // K of 6 blocks (swizzled pads to 8)
        // decode sizes: the exact mode (W4A4's decode + the W4A16 GEMM)
        {16, 512, 4096, S::linear, Gscale::per_row, bf16},
        {256, 256, 7168, S::swizzled128x4, Gscale::host, fp32},
    };
    for (const Fp4Case& c : cases) run_fp4_case(c, rng);
  }

  TEST_CASE("grouped_gemm W4A8 on NVFP4 activations (contiguous, gathered, masked) against float64 and the BF16 path") {
    if (current_device().arch != Arch::sm_90a) return;
    std::mt19937 rng(std::random_device{}());
    using S = ScaleLayout;
    using L = GroupedLayout;
    const DType bf16 = DType::bf16, fp32 = DType::fp32;
    auto grouped = [](L layout, int64_t n, int64_t k, std::vector<int32_t> counts, int64_t expected_m, S scales, Gscale gs,
                      DType d) {
      Fp4Case c{0, n, k, scales, gs, d};
      c.layout = layout, c.counts = std::move(counts), c.expected_m = expected_m;
      return c;
    };
    std::vector<Fp4Case> cases;
    // contiguous, sorted: ragged and empty experts (first, middle, last), padding rows past the groups
    // (experts of kW4A8GroupedLeastN rows: fewer run the exact mode)
    cases.push_back(grouped(L::contiguous, 4096, 512, {0, 300, 17, 0, 129, 1, 64, 0}, 512, S::linear, Gscale::host, bf16));
    cases.back().padding = 40;
    cases.push_back(grouped(L::contiguous, 4096, 768, {200, 0, 333, 65}, 512, S::swizzled128x4, Gscale::per_group, fp32));
    cases.push_back(grouped(L::contiguous, 4096, 512, {150, 150, 150}, 512, S::linear, Gscale::per_row, bf16));
    // gathered through row_index: ids -1 past the routed rows, one outside A (a NaN row)
    cases.push_back(grouped(L::contiguous, 384, 4096, {120, 0, 260, 31}, 512, S::linear, Gscale::device, bf16));
    cases.back().padding = 24, cases.back().tokens = 300, cases.back().bad_row_expert = 2;
    cases.push_back(grouped(L::contiguous, 256, 7168, {40, 17, 0, 33, 1}, 32, S::swizzled128x4, Gscale::per_group, fp32));
    cases.back().padding = 16, cases.back().tokens = 80, cases.back().bad_row_expert = 1;
    // masked: counts up to max_m, empty groups, rows past the counts poisoned
    cases.push_back(grouped(L::masked, 4096, 512, {300, 0, 17, 129, 300, 1}, 512, S::linear, Gscale::per_row, bf16));
    cases.back().max_m = 300;
    cases.push_back(grouped(L::masked, 4096, 768, {0, 64, 200}, 256, S::swizzled128x4, Gscale::per_group, fp32));
    cases.back().max_m = 200;
    // rows an expert few enough for the exact mode (W4A4's decode, gathered and per group)
    cases.push_back(grouped(L::masked, 128, 4096, {40, 0, 5}, 16, S::linear, Gscale::per_group, bf16));
    cases.back().max_m = 48;
    cases.push_back(grouped(L::contiguous, 256, 4096, {7, 9, 0, 3}, 16, S::swizzled128x4, Gscale::host, bf16));
    cases.back().tokens = 12, cases.back().bad_row_expert = 3;
    for (const Fp4Case& c : cases) run_fp4_case(c, rng);
  }
}
