// Prewarm's defaults against what default-configured calls load: the op fronts run under a
// SpecRecordScope (a device of an arch and SM count that is not there), and each kernel they
// ask for must be in prewarm_specs of the call's weight shapes with the default variants.
#include <doctest/doctest.h>

#include <string>
#include <unordered_set>
#include <vector>

#include "core/launcher.hpp"
#include "core/prewarm.hpp"
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
}
