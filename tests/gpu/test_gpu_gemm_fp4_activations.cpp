// W4A4 in one launch on sm_90a (the GEMM's producers decode A's NVFP4 rows to BF16,
// templates/sm90/fp4_activations.cuh) against the two-launch math run explicitly: A dequantized
// to BF16 without its global scale, then the BF16 GEMM of the same tile with A's global scale in
// its epilogue. Bit for bit, both D poisoned first: dense M = 1-4 (kW4A4OneLaunchRows);
// contiguous groups sorted and gathered through row_index (indices outside A, rows of no group) and
// masked groups with empty ones, the tile chosen for 4 rows a group and groups of up to 16 rows
// spanning several; both scale layouts of A, padded rows of A, K tails; A's global scale on the host,
// on the device, per row and per group; ModelOpt and prepacked weights.
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
  int groups;  // 0: a dense gemm
  GroupedLayout layout;
  int64_t m, n, k;  // m: gemm.m (a masked call's rows per group)
  ScaleLayout a_scales;
  enum AScale { host, device, per_row, per_group } a_scale;
  bool prepacked = false, gather = false;
  DType d = DType::bf16;
  int64_t a_pad = 0;  // bytes after each packed row of A
};

std::string describe(const OneLaunchCase& c) {
  const char* scales[] = {"host", "device", "per row", "per group"};
  return (c.groups ? std::string(c.layout == GroupedLayout::masked ? "masked" : c.gather ? "gathered" : "contiguous") + " x" +
                         std::to_string(c.groups)
                   : std::string("dense")) +
         " m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k) +
         (c.a_scales == ScaleLayout::swizzled128x4 ? " A sw128x4" : " A linear") + " gscale " + scales[c.a_scale] +
         (c.prepacked ? " prepacked" : "");
}

// The call of `g` / `ga` as the front validates it.
GemmCall call_of(const OneLaunchCase& c, const GemmArgs& g, const GroupedGemmArgs& ga) {
  return c.groups ? grouped_gemm_call(ga, "test") : gemm_call(g, "test");
}

void run_one_launch_case(const OneLaunchCase& c, std::mt19937& rng) {
  CAPTURE(describe(c));
  const bool masked = c.groups && c.layout == GroupedLayout::masked;
  const int weights = std::max(c.groups, 1);
  const int64_t rows = masked ? c.m * c.groups : c.m;
  const int64_t a_rows = c.gather ? rows / 2 + 3 : rows;
  const testutil::HostNvfp4 a(a_rows, c.k, c.a_scales, rng, c.a_pad);
  const testutil::HostNvfp4 w(weights * c.n, c.k, ScaleLayout::linear, rng);
  DeviceBuffer d_a = to_device(a.packed), d_as = to_device(a.scales), d_w = to_device(w.packed), d_ws = to_device(w.scales);
  DeviceBuffer d_pre;
  if (c.prepacked) {  // each group's weight prepacked, one after the other
    const int64_t bytes = prepacked_bytes(c.n, c.k);
    d_pre = DeviceBuffer(size_t(bytes * weights));
    for (int gi = 0; gi < weights; ++gi)
      prepack({{d_w.as<unsigned char>() + gi * c.n * c.k / 2, 0, d_ws.as<unsigned char>() + gi * c.n * c.k / 16,
                ScaleLayout::linear, {}},
               c.n, c.k, d_pre.as<unsigned char>() + gi * bytes},
              nullptr);
  }
  // A's global scales: a row's or a group's power of two times a mantissa (exact products)
  std::vector<float> scales(size_t(std::max<int64_t>(rows, weights)));
  for (size_t i = 0; i < scales.size(); ++i) scales[i] = std::ldexp(1.0f + float(rng() % 64) / 64.0f, int(rng() % 5) - 2);
  DeviceBuffer d_scales = to_device(scales);

  // the groups' sizes: contiguous ends with empty groups and rows of no group after the last;
  // masked rows per group, some none, some all
  std::vector<int32_t> sizes(static_cast<size_t>(weights));
  int64_t end = 0;
  for (int gi = 0; gi < c.groups; ++gi) {
    const int64_t r = gi % 3 == 1 ? 0 : int64_t(rng() % uint64_t(masked ? c.m + 1 : 2 * c.m / c.groups + 1));
    if (masked) sizes[size_t(gi)] = int32_t(gi % 4 == 2 ? c.m : r);
    else sizes[size_t(gi)] = int32_t(end = std::min(rows - 2, end + r));  // the last 2 rows in no group
  }
  std::vector<int32_t> row_index(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    row_index[size_t(r)] = r % 11 == 5 ? -3 : r % 13 == 7 ? int32_t(a_rows + r) : int32_t(rng() % uint64_t(a_rows));
  if (c.gather && rows > 0) row_index[size_t(rows - 1)] = -1;  // past the groups, as moe_route leaves it
  DeviceBuffer d_sizes = to_device(sizes), d_row_index = to_device(row_index);

  const int esize = c.d == DType::fp32 ? 4 : 2;
  const size_t d_bytes = size_t(rows * c.n * esize);
  DeviceBuffer d_one(d_bytes), d_two(d_bytes), d_decoded(size_t(rows * c.k * 2));
  d_one.fill(0xFF);
  d_two.fill(0xFF);
  GemmArgs g;
  g.m = c.m, g.n = c.n, g.k = c.k;
  g.a_dtype = DType::nvfp4;
  GlobalScale ga_scale{0.375f, nullptr, false};
  if (c.a_scale == OneLaunchCase::device) ga_scale = {1.0f, d_scales.as<float>(), false};
  if (c.a_scale == OneLaunchCase::per_row) ga_scale = {1.0f, d_scales.as<float>(), true};
  if (c.a_scale == OneLaunchCase::per_group) ga_scale = {1.0f, d_scales.as<float>(), false};
  g.a_fp4 = {d_a.get(), c.a_pad ? c.k / 2 + c.a_pad : 0, d_as.get(), c.a_scales, ga_scale};
  g.b = c.prepacked ? Nvfp4Tensor{d_pre.get(), 0, nullptr, ScaleLayout::linear, {0.75f, nullptr, false}}
                    : Nvfp4Tensor{d_w.get(), 0, d_ws.get(), ScaleLayout::linear, {0.75f, nullptr, false}};
  g.b_prepacked = c.prepacked;
  g.d = d_one.get(), g.d_dtype = c.d;
  GroupedGemmArgs ga;
  ga.gemm = g, ga.groups = c.groups, ga.layout = c.layout;
  (masked ? ga.masked_m : ga.group_ends) = d_sizes.as<int32_t>();
  if (c.gather) ga.row_index = d_row_index.as<int32_t>(), ga.a_rows = a_rows;
  ga.a_global_scale_per_group = c.a_scale == OneLaunchCase::per_group;
  ga.expected_m = kW4A4OneLaunchRows;

  // one launch: the kernel on NVFP4 A, no decode first
  const DeviceInfo& device = current_device();
  const GemmCall call = call_of(c, g, ga);
  const GemmKernel one = gemm_dispatch(device, call, nullptr);
  REQUIRE_FALSE(one.decodes_a);
  REQUIRE(one.spec.a_dtype == uint8_t(DType::nvfp4));
  if (c.groups) grouped_gemm(ga, nullptr);
  else gemm(g, nullptr);

  // two launches: A decoded (its global scale left to the epilogue), then the BF16 kernel
  g.d = ga.gemm.d = d_two.get();
  const GemmCall two_call = call_of(c, g, ga);
  DequantizeArgs decode;
  decode.src = g.a_fp4;
  decode.src.global_scale = GlobalScale{};
  decode.src_rows = a_rows;
  decode.row_indices = c.gather ? d_row_index.as<int32_t>() : nullptr;
  decode.rows = rows;
  decode.k = c.k;
  decode.out = d_decoded.get();
  dequantize(decode, nullptr);
  const GemmCall inner = gemm_call_on_decoded_a(two_call, d_decoded.get());
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
  // and holds values: a row of every case is stored, not left poisoned
  size_t written = 0;
  for (size_t i = 0; i + esize <= d_bytes; i += size_t(esize))
    written += !std::all_of(&got[i], &got[i] + esize, [](uint8_t b) { return b == 0xFF; });
  CHECK(written >= size_t(c.n));
}

// The one-launch cases of `cases`, each against its two-launch chain.
void run_one_launch_cases(std::initializer_list<OneLaunchCase> cases) {
  if (current_device().arch != Arch::sm_90a) return;  // (Blackwell's GEMMs take NVFP4 A natively)
  std::mt19937 rng(std::random_device{}());
  for (const OneLaunchCase& c : cases) run_one_launch_case(c, rng);
}

using C = OneLaunchCase;
constexpr GroupedLayout kContiguous = GroupedLayout::contiguous, kMasked = GroupedLayout::masked;
constexpr ScaleLayout kLinear = ScaleLayout::linear, kSwizzled = ScaleLayout::swizzled128x4;

}  // namespace

TEST_SUITE("gpu_gemm_fp4_activations") {
  TEST_CASE("W4A4 in one launch on sm_90a, dense M = 1-4: bit for bit the two-launch chain's D") {
    run_one_launch_cases({
        {0, kContiguous, 1, 4096, 7168, kLinear, C::host},
        {0, kContiguous, 3, 2880, 2880, kSwizzled, C::device, true, false, DType::fp32},
        {0, kContiguous, 4, 7168, 2080, kLinear, C::per_row, false, false, DType::bf16, 4},  // K tail, padded rows
        {0, kContiguous, 2, 1536, 8192, kSwizzled, C::per_row, true, false, DType::fp16},
        {0, kContiguous, 4, 4096, 4096, kLinear, C::host, false, false, DType::fp32},
    });
  }

  TEST_CASE("W4A4 in one launch on sm_90a, contiguous groups sorted: bit for bit the two-launch chain's D") {
    run_one_launch_cases({{8, kContiguous, 48, 1024, 2048, kSwizzled, C::per_group}});
  }

  TEST_CASE("W4A4 in one launch on sm_90a, contiguous groups gathered (indices outside A): bit for bit the two-launch chain's D") {
    run_one_launch_cases({
        {16, kContiguous, 40, 768, 2048, kLinear, C::host, false, true},
        {8, kContiguous, 64, 512, 2880, kSwizzled, C::device, true, true, DType::fp32},
    });
  }

  TEST_CASE("W4A4 in one launch on sm_90a, masked groups (empty ones): bit for bit the two-launch chain's D") {
    run_one_launch_cases({
        {6, kMasked, 16, 1024, 2048, kLinear, C::per_row},
        {4, kMasked, 16, 2048, 1024, kSwizzled, C::per_group, true, false, DType::fp32},
    });
  }

  TEST_CASE("W4A4 past 4 rows a tile (kW4A4OneLaunchRows) or K = 8192, and a batched call, decode A first on sm_90a") {
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
    GroupedGemmArgs ga;
    ga.gemm = g, ga.gemm.m = 1, ga.groups = 2, ga.layout = GroupedLayout::batched;
    CHECK(gemm_dispatch(current_device(), grouped_gemm_call(ga, "test", false), nullptr).decodes_a);
  }
}
