// W4A4 in one launch on sm_90a (the GEMM's producers decode A's NVFP4 rows to BF16,
// templates/sm90/fp4_activations.cuh) against the two-launch math run explicitly: A dequantized
// to BF16 without its global scale, then the BF16 GEMM of the same tile with A's global scale in
// its epilogue. Bit for bit, both D poisoned first: dense M = 1-4 (kW4A4OneLaunchRows); both
// scale layouts of A, padded rows of A, K tails; A's global scale on the host, on the device and
// per row; ModelOpt and prepacked weights. Larger and grouped calls decode A first.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "core/driver.hpp"
#include "core/error.hpp"
#include "core/gpu_util.hpp"
#include "core/launcher.hpp"
#include "dequantize_fixture.hpp"
#include "nvfp4/jit.hpp"
#include "ops/gemm/call.hpp"
#include "ops/gemm/dispatch.hpp"
#include "ops/gemm/launch.hpp"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;

namespace {

struct OneLaunchCase {
  int64_t m, n, k;
  ScaleLayout a_scales;
  enum AScale { host, device, per_row } a_scale;
  bool prepacked = false;
  DType d = DType::bf16;
  int64_t a_pad = 0;  // bytes after each packed row of A
};

std::string describe(const OneLaunchCase& c) {
  const char* scales[] = {"host", "device", "per row"};
  return "m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k) +
         (c.a_scales == ScaleLayout::swizzled128x4 ? " A sw128x4" : " A linear") + " gscale " + scales[c.a_scale] +
         (c.prepacked ? " prepacked" : "");
}

void run_one_launch_case(const OneLaunchCase& c, std::mt19937& rng) {
  CAPTURE(describe(c));
  const testutil::HostNvfp4 a(c.m, c.k, c.a_scales, rng, c.a_pad);
  const testutil::HostNvfp4 w(c.n, c.k, ScaleLayout::linear, rng);
  DeviceBuffer d_a = to_device(a.packed), d_as = to_device(a.scales), d_w = to_device(w.packed), d_ws = to_device(w.scales);
  DeviceBuffer d_pre;
  if (c.prepacked) {
    d_pre = DeviceBuffer(size_t(prepacked_bytes(c.n, c.k)));
    prepack({{d_w.get(), 0, d_ws.get(), ScaleLayout::linear, {}}, c.n, c.k, d_pre.get()}, nullptr);
  }
  // A's global scales: a row's power of two times a mantissa (exact products)
  std::vector<float> scales(size_t(c.m));
  for (float& x : scales) x = std::ldexp(1.0f + float(rng() % 64) / 64.0f, int(rng() % 5) - 2);
  DeviceBuffer d_scales = to_device(scales);

  const int esize = c.d == DType::fp32 ? 4 : 2;
  const size_t d_bytes = size_t(c.m * c.n * esize);
  DeviceBuffer d_one(d_bytes), d_two(d_bytes), d_decoded(size_t(c.m * c.k * 2));
  d_one.fill(0xFF);
  d_two.fill(0xFF);
  GemmArgs g;
  g.m = c.m, g.n = c.n, g.k = c.k;
  g.a_dtype = DType::nvfp4;
  GlobalScale ga_scale{0.375f, nullptr, false};
  if (c.a_scale == OneLaunchCase::device) ga_scale = {1.0f, d_scales.as<float>(), false};
  if (c.a_scale == OneLaunchCase::per_row) ga_scale = {1.0f, d_scales.as<float>(), true};
  g.a_fp4 = {d_a.get(), c.a_pad ? c.k / 2 + c.a_pad : 0, d_as.get(), c.a_scales, ga_scale};
  g.b = c.prepacked ? Nvfp4Tensor{d_pre.get(), 0, nullptr, ScaleLayout::linear, {0.75f, nullptr, false}}
                    : Nvfp4Tensor{d_w.get(), 0, d_ws.get(), ScaleLayout::linear, {0.75f, nullptr, false}};
  g.b_prepacked = c.prepacked;
  g.d = d_one.get(), g.d_dtype = c.d;

  // one launch: the kernel on NVFP4 A, no decode first
  const DeviceInfo& device = current_device();
  const GemmKernel one = gemm_dispatch(device, gemm_call(g, "test"), nullptr);
  REQUIRE_FALSE(one.decodes_a);
  REQUIRE(one.spec.a_dtype == uint8_t(DType::nvfp4));
  gemm(g, nullptr);

  // two launches: A decoded (its global scale left to the epilogue), then the BF16 kernel
  g.d = d_two.get();
  DequantizeArgs decode;
  decode.src = g.a_fp4;
  decode.src.global_scale = GlobalScale{};
  decode.src_rows = decode.rows = c.m;
  decode.k = c.k;
  decode.out = d_decoded.get();
  dequantize(decode, nullptr);
  const GemmCall inner = gemm_call_on_decoded_a(gemm_call(g, "test"), d_decoded.get());
  const GemmKernel two = gemm_dispatch(device, inner, nullptr);
  REQUIRE(two.spec.a_dtype == uint8_t(DType::bf16));
  CHECK(two.spec.tile == one.spec.tile);  // the same tile: the same sums in the same order
  launch_gemm(two, inner, nullptr);
  check_cu(driver().cuCtxSynchronize(), "one-launch W4A4 and its two-launch chain");

  std::vector<uint8_t> got(d_bytes), want(d_bytes);
  d_one.download(got.data(), d_bytes);
  d_two.download(want.data(), d_bytes);
  const auto diff = std::mismatch(got.begin(), got.end(), want.begin());
  if (diff.first != got.end()) {
    const int64_t element = (diff.first - got.begin()) / esize;
    FAIL_CHECK("D differs from the two-launch chain's first at (" << element / c.n << ", " << element % c.n << ")");
  }
  // and holds values: every row is stored, not left poisoned
  size_t written = 0;
  for (size_t i = 0; i + esize <= d_bytes; i += size_t(esize))
    written += !std::all_of(&got[i], &got[i] + esize, [](uint8_t b) { return b == 0xFF; });
  CHECK(written == size_t(c.m * c.n));
}

// The one-launch cases of `cases`, each against its two-launch chain.
void run_one_launch_cases(std::initializer_list<OneLaunchCase> cases) {
  if (current_device().arch != Arch::sm_90a) return;  // (Blackwell's GEMMs take NVFP4 A natively)
  std::mt19937 rng(std::random_device{}());
  for (const OneLaunchCase& c : cases) run_one_launch_case(c, rng);
}

using C = OneLaunchCase;
constexpr ScaleLayout kLinear = ScaleLayout::linear, kSwizzled = ScaleLayout::swizzled128x4;

}  // namespace

TEST_SUITE("gpu_gemm_fp4_activations") {
  TEST_CASE("W4A4 in one launch on sm_90a, M = 1-4: bit for bit the two-launch chain's D") {
    run_one_launch_cases({
        {1, 4096, 7168, kLinear, C::host},
        {3, 2880, 2880, kSwizzled, C::device, true, DType::fp32},
        {4, 7168, 2080, kLinear, C::per_row, false, DType::bf16, 4},  // K tail, padded rows
        {2, 1536, 8192, kSwizzled, C::per_row, true, DType::fp16},
        {4, 4096, 4096, kLinear, C::host, false, DType::fp32},
    });
  }

  TEST_CASE("W4A4 past 4 rows (kW4A4OneLaunchRows) or K = 8192, and grouped calls, decode A first on sm_90a") {
    if (current_device().arch != Arch::sm_90a) return;
    alignas(256) static unsigned char buffer[256];
    GemmArgs g;
    g.n = 64, g.k = 64, g.a_dtype = DType::nvfp4;
    g.a_fp4 = {buffer, 0, buffer, ScaleLayout::linear, {}};
    g.b.data = g.b.scales = g.d = buffer;
    for (const int64_t m : {kW4A4OneLaunchRows, kW4A4OneLaunchRows + 1}) {
      g.m = m;
      CAPTURE(m);
      CHECK(gemm_dispatch(current_device(), gemm_call(g, "test", false), nullptr).decodes_a == (m > kW4A4OneLaunchRows));
    }
    g.m = 1, g.k = kW4A4OneLaunchK + 64;
    CHECK(gemm_dispatch(current_device(), gemm_call(g, "test", false), nullptr).decodes_a);
    g.k = 64;
    alignas(16) static int32_t sizes[2] = {1, 1};
    for (GroupedLayout layout : {GroupedLayout::contiguous, GroupedLayout::masked, GroupedLayout::batched}) {
      GroupedGemmArgs ga;
      ga.gemm = g, ga.gemm.m = 1, ga.groups = 2, ga.layout = layout;
      if (layout == GroupedLayout::contiguous) ga.group_ends = sizes;
      if (layout == GroupedLayout::masked) ga.masked_m = sizes;
      CAPTURE(int(layout));
      CHECK(gemm_dispatch(current_device(), grouped_gemm_call(ga, "test", false), nullptr).decodes_a);
    }
  }
}
