// Prewarm's defaults against what default-configured calls load: the op fronts run under a
// SpecRecordScope (a device of an arch and SM count that is not there), and each kernel they
// ask for must be in prewarm_specs of the call's weight shapes with the default variants.
#include <doctest/doctest.h>

#include <string>
#include <unordered_set>
#include <vector>

#include "core/launcher.hpp"
#include "core/prewarm.hpp"
#include "ops/gemm/call.hpp"
#include "ops/gemm/gather_rows_op.hpp"
#include "ops/gemm/prewarm_variants.hpp"
#include "nvfp4/jit.h"
#include "nvfp4/jit.hpp"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;

namespace {

struct Asked {
  std::string call;
  KernelSpec spec;
};

// Every kernel the default-configured ops load for one layer of weight [n, k] (dense) and an
// expert weight of `experts` groups, at M = m. Pointers are a dummy buffer: nothing launches.
std::vector<Asked> default_calls(Arch arch, int sms, int64_t m, int64_t n, int64_t k, int32_t experts) {
  alignas(256) static unsigned char buffer[256];
  void* p = buffer;
  std::vector<Asked> asked;
  auto record = [&](const std::string& call, auto&& run) {
    const SpecRecordScope scope(arch, sms);
    run();
    for (const KernelSpec& s : scope.specs()) asked.push_back({call, s});
  };

  const bool runs_w4a16 = arch == Arch::sm_90a;  // the Blackwell GEMMs take NVFP4 activations only
  GemmArgs w4a16;
  w4a16.m = m, w4a16.n = n, w4a16.k = k;
  w4a16.a = w4a16.b.data = w4a16.b.scales = w4a16.d = p;
  if (runs_w4a16) record("gemm W4A16", [&] { gemm(w4a16, nullptr); });

  QuantizeArgs q;
  q.in = p, q.rows = m, q.k = k, q.out = p, q.scales = p;
  record("quantize", [&] { quantize(q, nullptr); });
  GemmArgs w4a4 = w4a16;
  w4a4.a = nullptr, w4a4.a_dtype = DType::nvfp4;
  w4a4.a_fp4 = {p, 0, p, q.scale_layout, GlobalScale{}};
  record("gemm W4A4 on quantize's A", [&] { gemm(w4a4, nullptr); });

  // Nvfp4Linear: its weight prepacked and static, W4A16, or W4A4 on its input_scale (given)
  if (runs_w4a16) {
    GemmArgs linear = w4a16;
    linear.b_prepacked = linear.weights_static = true;
    record("Nvfp4Linear w4a16", [&] { gemm(linear, nullptr); });
    QuantizeArgs q_given = q;
    q_given.scale_mode = GlobalScaleMode::given;
    record("Nvfp4Linear w4a4: quantize on input_scale", [&] { quantize(q_given, nullptr); });
    GemmArgs linear4 = w4a4;
    linear4.b_prepacked = linear4.weights_static = true;
    record("Nvfp4Linear w4a4", [&] { gemm(linear4, nullptr); });
  }

  DequantizeArgs dq;
  dq.src = {p, 0, p, ScaleLayout::linear, GlobalScale{}};
  dq.src_rows = m, dq.k = k, dq.out = p;
  record("dequantize", [&] { dequantize(dq, nullptr); });

  RmsNormQuantizeArgs rms;
  rms.in = p, rms.rows = m, rms.k = k, rms.weight = p, rms.out.data = p, rms.out.scales = p;
  record("rmsnorm_quantize", [&] { rmsnorm_quantize(rms, nullptr); });
  GemmArgs after_rms = w4a4;
  after_rms.a_fp4.scale_layout = rms.out.scale_layout;
  record("gemm W4A4 on rmsnorm_quantize's A", [&] { gemm(after_rms, nullptr); });

  SwigluQuantizeArgs swiglu;
  swiglu.in = p, swiglu.rows = m, swiglu.k = k, swiglu.out.data = p, swiglu.out.scales = p;
  record("swiglu_quantize", [&] { swiglu_quantize(swiglu, nullptr); });

  MoeStageArgs stage;
  stage.tokens = p, stage.rows = m, stage.k = k, stage.out.data = p, stage.out.scales = p;
  stage.topk = 2, stage.topk_ids = p, stage.topk_ids_out = p;
  record("moe_stage", [&] { moe_stage(stage, nullptr); });
  GroupedGemmArgs grouped;
  grouped.gemm = w4a4;
  grouped.gemm.m = m * 2;  // the tokens' top-2 rows
  grouped.gemm.a_fp4.scale_layout = stage.out.scale_layout;
  grouped.groups = experts;
  grouped.group_ends = static_cast<const int32_t*>(p);
  grouped.row_index = static_cast<const int32_t*>(p);
  grouped.a_rows = m;  // the tokens row_index reads
  record("grouped_gemm W4A4 (contiguous) on moe_stage's A", [&] { grouped_gemm(grouped, nullptr); });
  grouped.gemm.a = p, grouped.gemm.a_dtype = DType::bf16, grouped.gemm.a_fp4 = {};
  if (runs_w4a16) record("grouped_gemm W4A16 (contiguous)", [&] { grouped_gemm(grouped, nullptr); });
  return asked;
}

}  // namespace

TEST_SUITE("prewarm") {
  TEST_CASE("a default prewarm holds every kernel default-configured calls load, on every arch") {
    const int64_t n = 4096, k = 4096;
    const int32_t experts = 8;
    const std::vector<WeightShape> shapes = {{"dense", n, k, 1, {}}, {"experts", n, k, experts, {}}};
    struct Device {
      Arch arch;
      int sms;
    };
    for (const Device device : {Device{Arch::sm_90a, 132}, Device{Arch::sm_100a, 148}, Device{Arch::sm_120a, 188},
                                Device{Arch::sm_120a, 48}}) {
      const std::vector<KernelSpec> listed = prewarm_specs(shapes, {device.arch}, device.sms);
      const std::unordered_set<KernelSpec, KernelSpecHash> prewarmed(listed.begin(), listed.end());
      for (const int64_t m : {1, 16, 100, 1000, 4096}) {
        size_t gemms = 0;
        for (const Asked& a : default_calls(device.arch, device.sms, m, n, k, experts)) {
          gemms += a.spec.op == Op::gemm;
          INFO(to_string(device.arch), " (", device.sms, " SMs), M = ", m, ": ", a.call, " loads ", a.spec.describe());
          CHECK(prewarmed.count(a.spec) == 1);
        }
        CHECK(gemms >= 3);  // the recording saw the GEMMs
      }
    }
  }

  TEST_CASE("a recording loads nothing and answers for its own arch") {
    alignas(256) static unsigned char buffer[256];
    QuantizeArgs q;
    q.in = q.out = q.scales = buffer, q.rows = 3, q.k = 64;
    const SpecRecordScope outer(Arch::sm_100a, 148);
    {
      const SpecRecordScope inner(Arch::sm_120a, 188);
      quantize(q, nullptr);
      REQUIRE(inner.specs().size() == 1);
      CHECK(inner.specs()[0].arch == Arch::sm_120a);
      CHECK(inner.specs()[0].op == Op::quantize);
    }
    quantize(q, nullptr);  // the outer scope again
    REQUIRE(outer.specs().size() == 1);
    CHECK(outer.specs()[0].arch == Arch::sm_100a);
  }

  TEST_CASE("a W4A8 prewarm holds every kernel W4A8 calls load, dense and grouped, those that run the exact mode too") {
    alignas(256) static unsigned char buffer[256];
    void* p = buffer;
    const int64_t n = 4096, k = 2048;
    const int32_t experts = 16;
    PrewarmVariants v;
    v.a_dtypes = {DType::bf16, DType::nvfp4}, v.b_layouts = {WeightLayout::prepacked};
    v.a_scales = {ScaleLayout::linear, ScaleLayout::swizzled128x4};
    v.grouped = {GroupedLayout::contiguous, GroupedLayout::masked}, v.precisions = {GemmPrecision::w4a8};
    const std::vector<KernelSpec> listed =
        prewarm_specs({parse_shape("4096,2048", v), parse_shape("4096,2048,16", v)}, {Arch::sm_90a}, 132);
    const std::unordered_set<KernelSpec, KernelSpecHash> prewarmed(listed.begin(), listed.end());
    // BF16 A, and NVFP4 A (W4A4 input) in either scale layout
    for (const auto& [a_dtype, a_scales] : {std::pair{DType::bf16, ScaleLayout::linear}, std::pair{DType::nvfp4, ScaleLayout::linear},
                                            std::pair{DType::nvfp4, ScaleLayout::swizzled128x4}}) {
      for (const int64_t m : {1, 16, 100, 256, 257, 1000, 4096}) {
        GemmArgs g;
        g.n = n, g.k = k, g.b.data = g.d = p, g.b_prepacked = true, g.precision = GemmPrecision::w4a8;
        g.a_dtype = a_dtype;
        if (a_dtype == DType::nvfp4) g.a_fp4.data = g.a_fp4.scales = p, g.a_fp4.scale_layout = a_scales;
        else g.a = p;
        CAPTURE(int(a_dtype));
        CAPTURE(int(a_scales));
        const SpecRecordScope scope(Arch::sm_90a, 132);
        g.m = m;
        gemm(g, nullptr);
        GroupedGemmArgs ga;
        ga.gemm = g, ga.gemm.m = m * 4, ga.groups = experts, ga.group_ends = static_cast<const int32_t*>(p);
        grouped_gemm(ga, nullptr);
        ga.row_index = static_cast<const int32_t*>(p), ga.a_rows = m;
        grouped_gemm(ga, nullptr);
        ga.row_index = nullptr, ga.a_rows = 0;
        ga.layout = GroupedLayout::masked, ga.group_ends = nullptr, ga.masked_m = static_cast<const int32_t*>(p), ga.gemm.m = m;
        grouped_gemm(ga, nullptr);
        size_t activations = 0;
        for (const KernelSpec& spec : scope.specs()) {
          activations += spec.op == Op::fp8_activations;
          INFO("M = ", m, ": a W4A8 call loads ", spec.describe());
          CHECK(prewarmed.count(spec) == 1);
        }
        // the recording saw the GEMMs: dense, contiguous and masked (a gathered call shares the
        // contiguous call's exact-mode kernel, the gather being an argument)
        CHECK(scope.specs().size() >= 3);
        if (m > kW4A8ExactRows) CHECK(activations >= 1);
      }
    }
  }

  TEST_CASE("W4A4 on sm_90a: a dense call in one launch up to 4 rows and K = 8192 (NVFP4 A in the kernel's spec), A "
            "decoded first past them and in grouped calls; prewarm holds both") {
    alignas(256) static unsigned char buffer[256];
    void* p = buffer;
    const int32_t experts = 16;
    PrewarmVariants v;
    v.a_dtypes = {DType::nvfp4}, v.a_scales = {ScaleLayout::linear, ScaleLayout::swizzled128x4};
    v.b_layouts = {WeightLayout::linear, WeightLayout::prepacked};
    v.grouped = {GroupedLayout::contiguous, GroupedLayout::masked};
    const std::vector<KernelSpec> listed =
        prewarm_specs({parse_shape("4096,2048", v), parse_shape("4096,2048,16", v), parse_shape("1024,14336", v),
                       parse_shape("1024,14336,16", v)},
                      {Arch::sm_90a}, 132);
    const std::unordered_set<KernelSpec, KernelSpecHash> prewarmed(listed.begin(), listed.end());
    GemmArgs g;
    g.a_dtype = DType::nvfp4, g.b.data = g.b.scales = g.d = p;
    g.a_fp4 = {p, 0, p, ScaleLayout::swizzled128x4, GlobalScale{}};
    // (rows: M, a grouped call's expected_m)
    for (const auto& [n, k, rows] : std::vector<std::array<int64_t, 3>>{
             {4096, 2048, 1}, {4096, 2048, 4}, {4096, 2048, 5}, {4096, 2048, 64}, {4096, 2048, 1000}, {1024, 14336, 1}}) {
      const bool one_launch = rows <= kW4A4OneLaunchRows && k <= kW4A4OneLaunchK;
      CAPTURE(k);
      CAPTURE(rows);
      g.n = n, g.k = k;
      for (bool prepacked : {false, true}) {
        g.b_prepacked = prepacked;
        auto check_loads = [&](const char* call, bool in_one_launch, auto&& run) {
          const SpecRecordScope scope(Arch::sm_90a, 132);
          run();
          size_t gemms = 0, decodes = 0;
          for (const KernelSpec& spec : scope.specs()) {
            INFO(call, (prepacked ? " (prepacked)" : ""), " loads ", spec.describe());
            CHECK(prewarmed.count(spec) == 1);
            decodes += spec.op == Op::dequantize;
            if (spec.op != Op::gemm) continue;
            ++gemms;
            CHECK(gemm_spec_of(spec).a_dtype == uint8_t(in_one_launch ? DType::nvfp4 : DType::bf16));
          }
          CHECK(gemms == 1);
          CHECK((decodes > 0) == !in_one_launch);  // (the dispatch loads the decode, then the decode itself)
        };
        g.m = rows;
        check_loads("gemm", one_launch, [&] { gemm(g, nullptr); });
        GroupedGemmArgs ga;
        ga.gemm = g, ga.gemm.m = rows * 2, ga.groups = experts, ga.group_ends = static_cast<const int32_t*>(p);
        ga.expected_m = rows;
        check_loads("grouped_gemm (contiguous)", false, [&] { grouped_gemm(ga, nullptr); });
        ga.row_index = static_cast<const int32_t*>(p), ga.a_rows = rows;
        check_loads("grouped_gemm (gathered)", false, [&] { grouped_gemm(ga, nullptr); });
        ga.row_index = nullptr, ga.a_rows = 0;
        ga.layout = GroupedLayout::masked, ga.group_ends = nullptr, ga.masked_m = static_cast<const int32_t*>(p), ga.gemm.m = rows;
        check_loads("grouped_gemm (masked)", false, [&] { grouped_gemm(ga, nullptr); });
        // the workspace: none for a one-launch call
        CHECK(gemm_workspace_bytes(g) == (one_launch ? 0 : rows * k * 2));
        CHECK(grouped_gemm_workspace_bytes(ga) == experts * rows * k * 2);
      }
    }
    // a batched call decodes A first, whatever its rows
    const SpecRecordScope scope(Arch::sm_90a, 132);
    GroupedGemmArgs batched;
    batched.gemm = g, batched.gemm.m = 1, batched.groups = 4, batched.layout = GroupedLayout::batched;
    grouped_gemm(batched, nullptr);
    size_t decodes = 0;
    for (const KernelSpec& spec : scope.specs()) decodes += spec.op == Op::dequantize;
    CHECK(decodes > 0);
    CHECK(grouped_gemm_workspace_bytes(batched) == 4 * g.k * 2);
  }

  TEST_CASE("W4A16 through row_index on sm_90a: the rows copied first into the workspace (their size), the copy's "
            "kernel loaded with the GEMM's and held by prewarm") {
    alignas(256) static unsigned char buffer[256];
    void* p = buffer;
    const int32_t experts = 16;
    const int64_t n = 4096, k = 2048;
    PrewarmVariants v;
    v.a_dtypes = {DType::bf16, DType::fp16}, v.b_layouts = {WeightLayout::linear, WeightLayout::prepacked};
    const std::vector<KernelSpec> listed = prewarm_specs({parse_shape("4096,2048,16", v)}, {Arch::sm_90a}, 132);
    const std::unordered_set<KernelSpec, KernelSpecHash> prewarmed(listed.begin(), listed.end());
    for (const DType a : {DType::bf16, DType::fp16})
      for (const int64_t rows : {1, 8, 16, 64, 1000}) {
        CAPTURE(int(a));
        CAPTURE(rows);
        GroupedGemmArgs ga;
        ga.gemm.n = n, ga.gemm.k = k, ga.gemm.a = ga.gemm.b.data = ga.gemm.b.scales = ga.gemm.d = p, ga.gemm.a_dtype = a;
        ga.gemm.m = rows * 4, ga.groups = experts, ga.group_ends = static_cast<const int32_t*>(p), ga.expected_m = rows;
        CHECK(grouped_gemm_workspace_bytes(ga) == 0);  // sorted rows
        ga.row_index = static_cast<const int32_t*>(p), ga.a_rows = rows;
        CHECK(grouped_gemm_workspace_bytes(ga) == rows * 4 * k * 2);
        const SpecRecordScope scope(Arch::sm_90a, 132);
        grouped_gemm(ga, nullptr);
        size_t gathers = 0, gemms = 0;
        for (const KernelSpec& spec : scope.specs()) {
          INFO("a gathered call loads ", spec.describe());
          CHECK(prewarmed.count(spec) == 1);
          gemms += spec.op == Op::gemm;
          if (spec.op == Op::gather_rows) {
            ++gathers;
            CHECK(spec == gather_rows_spec(Arch::sm_90a, k, a));
          }
        }
        CHECK(gathers > 0);
        CHECK(gemms > 0);
        // a given workspace short of the rows is refused by name
        ga.gemm.workspace = p, ga.gemm.workspace_bytes = rows * 4 * k * 2 - 1;
        const std::string message = "workspace_bytes = " + std::to_string(rows * 4 * k * 2 - 1) + " is less than the " +
                                    std::to_string(rows * 4 * k * 2) + " bytes the rows gathered through row_index need";
        CHECK_THROWS_WITH(grouped_gemm(ga, nullptr), doctest::Contains(message.c_str()));
      }
  }

  TEST_CASE("a prewarm runs 1 to 256 threads, never more than its kernels") {
    CHECK(kMaxPrewarmThreads == 256);
    CHECK(prewarm_thread_count(100000, 31) == 31);
    CHECK(prewarm_thread_count(100000, 100000) == 256);
    CHECK(prewarm_thread_count(4, 100) == 4);
    CHECK(prewarm_thread_count(0, 100) == 1);
    CHECK(prewarm_thread_count(8, 0) == 1);
    CHECK(prewarm({}, 100000, nullptr).threads == 1);
    PrewarmOptions o;
    o.shapes = {{8, 64, 1}};
    o.archs = {"sm_90a"};
    o.threads = 100000;
    CHECK_THROWS_WITH_AS(nvfp4::jit::prewarm(o), doctest::Contains("threads = 100000 is not 0 (one per core) or 1 to 256"),
                         nvfp4::jit::Error);
  }

  TEST_CASE("a shape whose K no GEMM serves is named with its reason; its arch is not said to lack a GEMM backend") {
    WeightShape odd = parse_shape("64,48");
    odd.name = "odd", odd.origin = "m.txt:3";
    const std::vector<Arch> archs = {Arch::sm_90a, Arch::sm_100a};
    std::vector<std::string> gaps = prewarm_gaps({odd}, archs, prewarm_specs({odd}, archs));
    REQUIRE(gaps.size() == 1);
    CHECK(gaps[0] == "m.txt:3: `odd` (N = 64, K = 48): no GEMM kernels: K = 48 is not a multiple of 32, so no GEMM kernel "
                     "serves this shape; its quantizers and dequantize are prewarmed");
    // beside a shape a GEMM serves, the arch is served: still only the K note
    const WeightShape even = parse_shape("64,64");
    gaps = prewarm_gaps({odd, even}, archs, prewarm_specs({odd, even}, archs));
    CHECK(gaps.size() == 1);
    CHECK(gemm_k_problem(even).empty());
  }

  TEST_CASE("a GEMM variant's prewarm flags are the variant fields' words: each parses back to the variant") {
    GemmVariant v;
    v.a = DType::nvfp4, v.d = DType::fp32, v.bias = uint8_t(DType::bf16), v.b = WeightLayout::prepacked;
    v.a_scales = ScaleLayout::swizzled128x4, v.grouped = GroupedLayout::masked;
    const std::string flags = prewarm_variant_flags(v, true);
    CHECK(flags == " --a-dtype nvfp4 --d-dtype fp32 --bias bf16 --b-layout prepacked --a-scales swizzled --grouped masked");
    PrewarmVariants parsed;
    for (size_t at = flags.find(" --"); at != std::string::npos;) {
      const size_t value = flags.find(' ', at + 3), next = flags.find(" --", value);
      const std::string key = flags.substr(at + 3, value - at - 3);
      CAPTURE(key);
      CHECK(set_prewarm_variant(parsed, key, flags.substr(value + 1, next == std::string::npos ? next : next - value - 1)) == "");
      at = next;
    }
    CHECK(parsed.a_dtypes == std::vector<DType>{v.a});
    CHECK(parsed.d_dtypes == std::vector<DType>{v.d});
    CHECK(parsed.biases == std::vector<uint8_t>{v.bias});
    CHECK(parsed.b_layouts == std::vector<WeightLayout>{v.b});
    CHECK(parsed.a_scales == std::vector<ScaleLayout>{v.a_scales});
    CHECK(parsed.grouped == std::vector<GroupedLayout>{v.grouped});
    // W4A16 names no A scale layout; a dense weight no grouped layout; no bias is `none`
    CHECK(prewarm_variant_flags(GemmVariant{}, false) == " --a-dtype bf16 --d-dtype bf16 --bias none --b-layout linear");
  }

  TEST_CASE("archs with an empty name are refused, naming the argument, in C++ and C") {
    PrewarmOptions o;
    o.shapes = {{8, 64, 1}};
    o.archs = {"sm_90a", ""};
    CHECK_THROWS_WITH_AS(nvfp4::jit::prewarm(o), doctest::Contains(("archs[1] is empty: name an arch (" + arch_names() + ")").c_str()),
                         nvfp4::jit::Error);
    o.archs = {"sm_89"};  // an unknown name: the message lists every arch
    CHECK_THROWS_WITH_AS(nvfp4::jit::prewarm(o),
                         doctest::Contains("`sm_89` is not one of sm_90a, sm_100a, sm_103a, sm_120a, sm_121a"),
                         nvfp4::jit::Error);
    const int64_t shape[] = {8, 64, 1};
    nvfp4_prewarm_args p;
    nvfp4_prewarm_args_init(&p);
    p.shapes = shape, p.num_shapes = 1;
    for (const char* archs : {",,", ",", "sm_90a,", ",sm_90a"}) {
      CAPTURE(archs);
      p.archs = archs;
      CHECK(nvfp4_jit_prewarm(&p, nullptr) == NVFP4_INVALID_ARGUMENT);
      CHECK(std::string(nvfp4_jit_last_error()).find("archs[") != std::string::npos);
      CHECK(std::string(nvfp4_jit_last_error()).find("] is empty") != std::string::npos);
    }
  }
}
