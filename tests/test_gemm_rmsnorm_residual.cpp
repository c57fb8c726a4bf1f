// RMSNorm of A inside the GEMM (GemmArgs::a_rmsnorm_weight) and the residual add in its epilogue
// (GemmArgs::residual) without a GPU: their argument checks and messages, the problems and
// kernels they make (keys, names, template arguments, JSON, shared memory, prewarm), where they
// are refused, and the SASS of their sm_90a kernels.
#include <doctest/doctest.h>

#include <string>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/launcher.hpp"
#include "core/prewarm.hpp"
#include "gemm_test_util.hpp"
#include "ops/gemm/gemm.hpp"
#include "ops/gemm/launch.hpp"
#include "ops/gemm/m_buckets.hpp"
#include "ops/gemm/prewarm_variants.hpp"
#include "ops/gemm/sm90/tiles.hpp"
#include "ops/gemm/spec_codes.hpp"
#include "sass_util.hpp"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;
using namespace nvfp4::jit::detail::test;

namespace {

alignas(64) unsigned char buffer[4096];

GemmArgs normed() {
  GemmArgs g;
  g.m = 7, g.n = 64, g.k = 256;
  g.a = buffer, g.b.data = buffer, g.b.scales = buffer, g.d = buffer;
  g.a_rmsnorm_weight = buffer;
  return g;
}

// gemm's message for `g`, "" where it passes validation (without a GPU it fails later, at the device)
std::string error_of(const GemmArgs& g) {
  try {
    gemm(g, nullptr);
  } catch (const Error& e) {
    return e.status() == Status::cuda_error || e.status() == Status::no_device ? "" : e.what();
  }
  return "";
}

// Every kernel `calls` loads on sm_90a (132 SMs, recorded, no GPU needed) is among `prewarmed`.
template <class Calls>
void check_prewarmed(const std::unordered_set<KernelSpec, KernelSpecHash>& prewarmed, int64_t m, Calls&& calls) {
  CAPTURE(m);
  const SpecRecordScope scope(Arch::sm_90a, 132);
  calls();
  REQUIRE(!scope.specs().empty());
  for (const KernelSpec& spec : scope.specs()) {
    INFO("M = ", m, ": the call loads ", spec.describe());
    CHECK(prewarmed.count(spec) == 1);
  }
}

// gemm_prewarm_hint of `g` on an sm_90a of 132 SMs.
std::string hint_of(const GemmArgs& g) {
  DeviceInfo device;
  device.arch = Arch::sm_90a, device.sm_count = 132;
  return gemm_prewarm_hint(gemm_call(g, "test"), device);
}

// grouped_gemm's message for contiguous groups of `g`'s rows (3 and 4 rows), "" where it passes validation
std::string grouped_error_of(const GemmArgs& g) {
  static int32_t ends[2] = {3, 7};
  GroupedGemmArgs grouped;
  grouped.gemm = g, grouped.groups = 2, grouped.group_ends = ends;
  try {
    grouped_gemm(grouped, nullptr);
  } catch (const Error& e) {
    return e.status() == Status::cuda_error || e.status() == Status::no_device ? "" : e.what();
  }
  return "";
}

void check_error(const GemmArgs& g, const std::string& expected) {
  const std::string msg = error_of(g);
  CAPTURE(msg);
  CHECK(msg.find("nvfp4::jit::gemm: " + expected) == 0);
}

}  // namespace

TEST_SUITE("gemm_rmsnorm_residual") {
  TEST_CASE("bad arguments fail naming them: dtype, precision, eps, alignment, grouped") {
    CHECK(error_of(normed()) == "");
    GemmArgs g = normed();
    g.a_rmsnorm_weight_fp32 = true;
    CHECK(error_of(g) == "");
    g.a_rmsnorm_weight = buffer + 4;  // fp32: 8-byte aligned
    check_error(g, "a_rmsnorm_weight");
    CHECK(error_of(g).find("aligned") != std::string::npos);
    g = normed(), g.a_rmsnorm_weight = buffer + 2;  // 16-bit: 4-byte aligned (its pairs)
    check_error(g, "a_rmsnorm_weight");
    g = normed(), g.a_rmsnorm_weight = buffer + 4;
    CHECK(error_of(g) == "");
    g = normed(), g.a_rmsnorm_weight = nullptr, g.a_rmsnorm_weight_fp32 = true;
    check_error(g, "a_rmsnorm_weight_fp32 is set but a_rmsnorm_weight is null (no RMSNorm)");
    for (const float eps : {0.0f, -1e-6f, INFINITY, NAN}) {
      CAPTURE(eps);
      g = normed(), g.a_rmsnorm_eps = eps;
      check_error(g, "a_rmsnorm_eps = ");
      CHECK(error_of(g).find("must be positive and finite") != std::string::npos);
    }
    g = normed(), g.a = nullptr, g.a_dtype = DType::nvfp4, g.a_fp4.data = buffer, g.a_fp4.scales = buffer;
    check_error(g, "a_rmsnorm_weight with a_dtype = nvfp4 (W4A4): RMSNorm in the GEMM reads BF16 or FP16 rows of A");
    g = normed(), g.b_prepacked = true, g.b.scales = nullptr, g.precision = GemmPrecision::w4a8;
    check_error(g, "a_rmsnorm_weight with precision = w4a8: RMSNorm in the GEMM runs the exact mode only so far");
    g = normed(), g.a_dtype = DType::fp16;
    CHECK(error_of(g) == "");
    g = normed(), g.m = 0, g.a_rmsnorm_weight = buffer + 1;  // no rows: no buffer is read
    CHECK(error_of(g) == "");
    CHECK(grouped_error_of(normed()).find(
              "nvfp4::jit::grouped_gemm: gemm.a_rmsnorm_weight: RMSNorm in the GEMM runs dense gemm calls only so far") == 0);
  }

  TEST_CASE("its kernels: a key, name and template argument of their own, the JSON field, the stages beside the row factors") {
    const GemmSpec plain = with_epilogue(sm90_problem(2 * 14336, 4096, true), GemmEpilogue::swiglu);
    const GemmSpec norm16 = with_a_rmsnorm(plain, true, false), norm32 = with_a_rmsnorm(plain, true, true);
    CHECK(with_a_rmsnorm(plain, false, true) == plain);
    CHECK(gemm_a_rmsnorm_code(plain) == nvfp4k::A_RMSNORM_NONE);
    CHECK(gemm_a_rmsnorm_code(norm16) == nvfp4k::A_RMSNORM_16BIT);
    CHECK(gemm_a_rmsnorm_code(norm32) == nvfp4k::A_RMSNORM_FP32);
    // the call's problem carries it
    GemmArgs g = normed();
    CHECK((gemm_call(g, "test").problem.flags & kFlagARmsNorm) != 0);
    g.a_rmsnorm_weight_fp32 = true;
    CHECK((gemm_call(g, "test").problem.flags & kFlagARmsNormFp32) != 0);
    g.a_rmsnorm_weight = nullptr, g.a_rmsnorm_weight_fp32 = false;
    CHECK((gemm_call(g, "test").problem.flags & (kFlagARmsNorm | kFlagARmsNormFp32)) == 0);
    GemmProblem p;
    p.n = 4096, p.k = 4096, p.a_rmsnorm = true, p.a_rmsnorm_weight_fp32 = true;
    CHECK(gemm_a_rmsnorm_code(gemm_problem(Arch::sm_90a, p)) == nvfp4k::A_RMSNORM_FP32);

    const GemmBackend& backend = sm90_backend();
    CHECK(backend.unsupported(norm16) == "");
    CHECK(backend.unsupported(gemm_with_precision(norm16, GemmPrecision::w4a8)) ==
          "RMSNorm of A (a_rmsnorm_weight) runs in dense exact-mode GEMMs only so far");
    for (const int64_t rows : {1, 16, 100, 4096}) {
      CAPTURE(rows);
      const GemmTile tile = backend.for_rows(backend.heuristic(norm16, rows, 132), rows);
      const GemmSpec spec = gemm_spec(norm16, tile);
      CHECK(backend.tile_problem(spec) == "");
      sm90::Tile t = sm90::from_config(tile);
      CHECK(backend.shared_bytes(spec) == sm90::shared_bytes(t) + unsigned(4 * t.block_m));  // the rows' 1 / rms
      const std::string name = backend.kernel_name(gemm_kernel_spec(backend, norm16, tile));
      CAPTURE(name);
      CHECK(name.find("_swiglu_rmsnorm_bm") != std::string::npos);
      CHECK(backend.kernel_name(gemm_kernel_spec(backend, norm32, tile)).find("_swiglu_rmsnormf32_bm") != std::string::npos);
      CHECK_FALSE(gemm_key(gemm_spec(norm16, tile)) == gemm_key(gemm_spec(plain, tile)));
      CHECK_FALSE(gemm_key(gemm_spec(norm16, tile)) == gemm_key(gemm_spec(norm32, tile)));
      const std::string source16 = generate(gemm_kernel_spec(backend, norm16, tile)).source;
      CHECK(source16.find("EPILOGUE = 1;") != std::string::npos);  // SWIGLU
      CHECK(source16.find("RMSNORM = 1, RESIDUAL = 0;") != std::string::npos);  // a 16-bit norm weight
      CHECK(generate(gemm_kernel_spec(backend, norm32, tile)).source.find("RMSNORM = 2, RESIDUAL = 0;") != std::string::npos);
    }
    // without an epilogue
    const GemmSpec dense = with_a_rmsnorm(sm90_problem(4096, 4096, false), true, false);
    const GemmTile tile = backend.heuristic(dense, 16, 132);
    const std::string source = generate(gemm_kernel_spec(backend, dense, tile)).source;
    CHECK(source.find("EPILOGUE = 0;") != std::string::npos);
    CHECK(source.find("RMSNORM = 1, RESIDUAL = 0;") != std::string::npos);

    const nlohmann::ordered_json json = gemm_spec_json(gemm_spec(norm32, tile));
    CHECK(json["a_rmsnorm"] == "fp32");
    CHECK(gemm_spec_json(gemm_spec(norm16, tile))["a_rmsnorm"] == "a_dtype");
    CHECK(gemm_spec_json(gemm_spec(plain, tile))["a_rmsnorm"] == "none");
    GemmSpec back;
    REQUIRE(gemm_spec_from_json(json, Arch::sm_90a, &back) == "");
    CHECK(back == gemm_spec(norm32, tile));
    nlohmann::json older = json;  // a table written before the field
    older.erase("a_rmsnorm");
    REQUIRE(gemm_spec_from_json(older, Arch::sm_90a, &back) == "");
    CHECK(back == gemm_spec(plain, tile));
    older["a_rmsnorm"] = "fp8";
    CHECK(gemm_spec_from_json(older, Arch::sm_90a, &back) == "a_rmsnorm = \"fp8\" is not none, a_dtype or fp32");

    // a tile whose ring fills the shared memory gives up the stages the row factors need
    const sm90::Tile full = sm90::from_config(backend.heuristic(sm90_problem(2 * 14336, 4096, true), 4096, 132));
    REQUIRE(sm90::tile_problem(full, 4096) == "");
    const sm90::Tile with = sm90::with_a_rmsnorm(full);
    CHECK(with.a_rmsnorm);
    CHECK(with.stages <= full.stages);
    CHECK(with.stages >= full.stages - 1);
    CHECK(sm90::tile_problem(with, 4096) == "");
    sm90::Tile without = with;
    without.a_rmsnorm = false;
    CHECK(sm90::shared_bytes(with) == sm90::shared_bytes(without) + unsigned(4 * with.block_m));
  }

  TEST_CASE("a prewarm with a-rmsnorm holds every kernel its calls load; its hint names the variant") {
    alignas(256) static unsigned char buf[256];
    PrewarmVariants v;
    REQUIRE(set_prewarm_variants(v, "a-dtype=bf16,fp16,nvfp4 b-layout=linear,prepacked epilogue=none,swiglu "
                                    "a-rmsnorm=input,fp32") == "");
    CHECK(set_prewarm_variant(v, "a-rmsnorm", "half").find("a-rmsnorm: `half` is not one of none, input, fp32") == 0);
    const std::vector<KernelSpec> listed = prewarm_specs({parse_shape("2048,4096", v)}, {Arch::sm_90a}, 132);
    const std::unordered_set<KernelSpec, KernelSpecHash> prewarmed(listed.begin(), listed.end());
    size_t normed_specs = 0;
    for (const GemmSpec& s : gemm_specs_of(listed)) {
      CHECK(gemm_a_rmsnorm_code(s) != nvfp4k::A_RMSNORM_NONE);  // none was not asked for
      normed_specs += s.a_dtype != uint8_t(DType::nvfp4);
    }
    CHECK(normed_specs > 0);
    GemmArgs g;
    g.n = 2048, g.k = 4096, g.a = g.b.data = g.b.scales = g.d = buf, g.a_rmsnorm_weight = buf;
    for (const bool prepacked : {false, true})
      for (const bool fp32 : {false, true})
        for (const int64_t m : {1, 16, 100, 4096})
          check_prewarmed(prewarmed, m, [&] {
            g.m = m, g.b_prepacked = prepacked, g.a_rmsnorm_weight_fp32 = fp32, g.a_dtype = fp32 ? DType::fp16 : DType::bf16;
            gemm(g, nullptr);
            g.epilogue = prepacked ? GemmEpilogue::swiglu : GemmEpilogue::none;
            gemm(g, nullptr);
            g.epilogue = GemmEpilogue::none;
          });
    g.m = 1, g.a_rmsnorm_weight_fp32 = true;
    CHECK(hint_of(g).find(" --a-rmsnorm fp32") != std::string::npos);
  }

  TEST_CASE("the residual add: bad arguments fail naming them; its kernels are keys, names and prewarm variants of their own") {
    GemmArgs r = normed();
    r.a_rmsnorm_weight = nullptr, r.residual = buffer;
    CHECK(error_of(r) == "");
    r.residual_row_stride = 72;
    CHECK(error_of(r) == "");
    r.residual_row_stride = 60;
    check_error(r, "residual_row_stride = 60 is less than n = 64");
    r.residual_row_stride = -1;
    check_error(r, "residual_row_stride");
    r = normed(), r.residual = buffer + 1;  // BF16 D: 2-byte aligned
    check_error(r, "residual");
    CHECK(error_of(r).find("aligned") != std::string::npos);
    r.d_dtype = DType::fp32, r.residual = buffer + 2;  // FP32 D: 4-byte aligned
    check_error(r, "residual");
    r.residual = buffer + 4;
    CHECK(error_of(r) == "");
    r = normed(), r.residual = nullptr, r.residual_row_stride = 64;
    check_error(r, "residual_row_stride = 64 is set but residual is null");
    r = normed(), r.residual = buffer, r.b_prepacked = true, r.b.scales = nullptr, r.n = 128, r.epilogue = GemmEpilogue::swiglu;
    check_error(r, "residual with a fused epilogue (swiglu, moe_combine) is not supported");
    r = normed(), r.residual = buffer, r.a_rmsnorm_weight = nullptr, r.a = nullptr, r.a_dtype = DType::nvfp4;
    r.a_fp4.data = buffer, r.a_fp4.scales = buffer;
    check_error(r, "residual with a_dtype = nvfp4 (W4A4) is not supported so far");
    r = normed(), r.residual = buffer, r.a_rmsnorm_weight = nullptr, r.b_prepacked = true, r.b.scales = nullptr;
    r.precision = GemmPrecision::w4a8;
    check_error(r, "residual with precision = w4a8 is not supported so far");
    r = normed(), r.residual = buffer, r.m = 1 << 20, r.residual_row_stride = int64_t(1) << 50;
    check_error(r, "residual");  // its span past 64 bits
    r = normed(), r.a_rmsnorm_weight = nullptr, r.residual = buffer;
    CHECK(grouped_error_of(r).find(
              "nvfp4::jit::grouped_gemm: gemm.residual: the residual add runs in dense gemm calls only so far") == 0);

    const GemmBackend& backend = sm90_backend();
    const GemmSpec plain = sm90_problem(4096, 14336, true), added = with_residual(plain, true);
    CHECK(with_residual(plain, false) == plain);
    CHECK(gemm_residual(added));
    r = normed(), r.residual = buffer;
    CHECK(gemm_residual(gemm_call(r, "test").problem));
    CHECK(backend.unsupported(added) == "");
    CHECK(backend.unsupported(with_epilogue(added, GemmEpilogue::swiglu)) ==
          "the residual add runs in dense exact-mode GEMMs without a fused epilogue only so far");
    const GemmTile tile = backend.heuristic(added, 1, 132);
    const GemmSpec kernel = gemm_kernel_spec(backend, added, tile);
    CHECK(backend.kernel_name(kernel).find("_prepacked_residual_bm") != std::string::npos);
    CHECK_FALSE(gemm_key(kernel) == gemm_key(gemm_kernel_spec(backend, plain, tile)));
    CHECK(generate(kernel).source.find("RMSNORM = 0, RESIDUAL = 1;") != std::string::npos);
    CHECK(generate(gemm_kernel_spec(backend, with_a_rmsnorm(added, true, false), tile)).source.find("RMSNORM = 1, RESIDUAL = 1;") !=
          std::string::npos);
    const nlohmann::ordered_json json = gemm_spec_json(gemm_spec(added, tile));
    CHECK(json["residual"] == true);
    GemmSpec back;
    REQUIRE(gemm_spec_from_json(json, Arch::sm_90a, &back) == "");
    CHECK(back == gemm_spec(added, tile));
    nlohmann::json older = json;
    older.erase("residual");
    REQUIRE(gemm_spec_from_json(older, Arch::sm_90a, &back) == "");
    CHECK(back == gemm_spec(plain, tile));
    older["residual"] = "yes";
    CHECK(gemm_spec_from_json(older, Arch::sm_90a, &back) == "residual is not true or false");

    // prewarm residual=add: every kernel a residual call loads; its hint names the variant
    PrewarmVariants v;
    REQUIRE(set_prewarm_variants(v, "a-dtype=bf16,nvfp4 b-layout=linear,prepacked residual=add") == "");
    const std::vector<KernelSpec> listed = prewarm_specs({parse_shape("4096,14336", v)}, {Arch::sm_90a}, 132);
    const std::unordered_set<KernelSpec, KernelSpecHash> prewarmed(listed.begin(), listed.end());
    for (const GemmSpec& s : gemm_specs_of(listed)) CHECK(gemm_residual(s));
    CHECK_FALSE(listed.empty());
    alignas(256) static unsigned char buf[256];
    GemmArgs g;
    g.n = 4096, g.k = 14336, g.a = g.b.data = g.b.scales = g.d = buf;
    g.residual = buf;
    for (const bool prepacked : {false, true})
      for (const int64_t m : {1, 16, 100, 4096})
        check_prewarmed(prewarmed, m, [&] {
          g.m = m, g.b_prepacked = prepacked;
          gemm(g, nullptr);
        });
    g.m = 1;
    CHECK(hint_of(g).find(" --residual add") != std::string::npos);
  }

  TEST_CASE("Blackwell's backends refuse them, naming the arch") {
    for (Arch arch : {Arch::sm_100a, Arch::sm_120a}) {
      CAPTURE(to_string(arch));
      const GemmBackend& backend = gemm_backend(arch, "test");
      const GemmSpec problem = with_a_rmsnorm(
          gemm_problem(arch, 4096, 4096, DType::bf16, DType::bf16, ScaleLayout::linear, false, kNoDType), true, false);
      CHECK(backend.unsupported(problem) ==
            fmt::format("RMSNorm of A in the GEMM (a_rmsnorm_weight) runs on sm_90a only so far, not on {} (run "
                        "rmsnorm_quantize's normed output, then gemm)",
                        to_string(arch)));
      const GemmSpec added = with_residual(
          gemm_problem(arch, 4096, 4096, DType::bf16, DType::bf16, ScaleLayout::linear, false, kNoDType), true);
      CHECK(backend.unsupported(added) ==
            fmt::format("the residual add in the GEMM's epilogue (residual) runs on sm_90a only so far, not on {}",
                        to_string(arch)));
    }
  }

  TEST_CASE("SASS of Llama's gate_up with RMSNorm and SwiGLU, qkv with RMSNorm, down with the residual: no local memory") {
    const GemmBackend& backend = sm90_backend();
    std::vector<GemmSpec> specs;
    const GemmSpec problem = with_a_rmsnorm(with_epilogue(sm90_problem(2 * 14336, 4096, true), GemmEpilogue::swiglu), true, false);
    for (int64_t rows : {1, 16, 100, 4096})
      specs.push_back(gemm_spec(problem, backend.for_rows(backend.heuristic(problem, rows, 132), rows)));
    const GemmSpec qkv = with_a_rmsnorm(sm90_problem(6144, 4096, false), true, true);  // the weight as stored, fp32 norm weight
    for (int64_t rows : {1, 16})
      specs.push_back(gemm_spec(qkv, backend.for_rows(backend.heuristic(qkv, rows, 132), rows)));
    const GemmSpec down = with_residual(sm90_problem(4096, 14336, true), true);  // down_proj with the residual add
    for (int64_t rows : {1, 16, 4096})
      specs.push_back(gemm_spec(down, backend.for_rows(backend.heuristic(down, rows, 132), rows)));
    for_each_disassembled(specs, [](const GemmSpec& spec, const std::string& name, const std::string& text) {
      CAPTURE(gemm_key(spec).describe());
      CHECK((name.find("_rmsnorm") != std::string::npos || name.find("_residual") != std::string::npos));
      const Sass s = parse_sass(text, name, sm90_mma_mnemonic(spec));
      CHECK(s.matches > 0);
      CHECK(s.loop_local_accesses == 0);
      // down's 256-row tile with the residual (128 accumulators a thread) keeps its residual
      // values in local memory in the epilogue, outside the k loop; the others none
      if (!(gemm_residual(spec) && spec.tile.block_m > 128)) CHECK(s.local_accesses == 0);
      CHECK(s.registers <= 65536 / spec.tile.threads);
    });
  }
}
