// The W4A8 precision mode on the CPU: its validation messages, its kernels' keys, the fold of
// the kernel's FP16 path (sm90/fp8_operand.cuh) against fp8_fold.cuh's for every row exponent,
// scale and nibble, the activation column order against the weight fragment's, and the SASS of
// its kernels.
#include <doctest/doctest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "common/fp8_fold.cuh"
#include "common/nvfp4_format.cuh"
#include "core/error.hpp"
#include "core/op_registry.hpp"
#include "nvfp4/jit.hpp"
#include "ops/gemm/backend.hpp"
#include "ops/gemm/call.hpp"
#include "ops/gemm/fp8_activations_op.hpp"
#include "sass_util.hpp"
#include "sm90/fp8_operand.cuh"
#include "sm90/prepacked_weight.cuh"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;
using namespace nvfp4::jit::detail::test;

namespace {

alignas(64) unsigned char buffer[4096];

GemmArgs w4a8_args() {
  GemmArgs g;
  g.m = 300, g.n = 64, g.k = 256;
  g.a = g.d = buffer;
  g.b.data = buffer;
  g.b_prepacked = true;
  g.precision = GemmPrecision::w4a8;
  return g;
}

// The error `f` throws, "" for none.
template <class F>
std::string error_in(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// gemm_workspace_bytes's error (it checks what gemm does but the buffers), "" for none.
std::string error_of(const GemmArgs& g) { return error_in([&] { gemm_workspace_bytes(g); }); }

// w4a8_args on NVFP4 activations (linear scales, a host global scale)
GemmArgs fp4_w4a8_args() {
  GemmArgs g = w4a8_args();
  g.a = nullptr, g.a_dtype = DType::nvfp4;
  g.a_fp4.data = g.a_fp4.scales = buffer;
  g.a_fp4.global_scale.value = 0.5f;
  return g;
}

// gemm_call's error with the buffers checked, "" for none.
std::string gemm_error(const GemmArgs& g) { return error_in([&] { gemm_call(g, "test"); }); }

// grouped_gemm_workspace_bytes's error, "" for none.
std::string grouped_error(const GroupedGemmArgs& ga) { return error_in([&] { grouped_gemm_workspace_bytes(ga); }); }

double fp16(unsigned bits) { return nvfp4k::fp16_bits_to_float(bits & 0xFFFFu); }

}  // namespace

TEST_SUITE("gemm_w4a8") {
  TEST_CASE("W4A8 arguments: the workspace size, and refusals naming the argument") {
    CHECK(error_of(w4a8_args()) == "");
    CHECK(gemm_workspace_bytes(w4a8_args()) == 300 * 256 + 4 * 300);
    GemmArgs g = w4a8_args();
    g.m = 257, g.k = 32;
    CHECK(gemm_workspace_bytes(g) == (257 * 32 + 15) / 16 * 16 + 4 * 257);
    g.m = 256;  // decode and small batches run the exact mode: no workspace
    CHECK(gemm_workspace_bytes(g) == 0);
    CHECK(gemm_call(g, "test", false).args.precision == GemmPrecision::exact);
    g.workspace = buffer, g.workspace_bytes = 16;  // what a caller sizing it by gemm_workspace_bytes may pass
    CHECK_NOTHROW(gemm_call(g, "test"));
    g = w4a8_args(), g.b_prepacked = false, g.b.scales = buffer;
    CHECK(error_of(g).find("b_prepacked") != std::string::npos);
    g = w4a8_args(), g.precision = GemmPrecision(7);
    CHECK(error_of(g).find("precision = 7 is not a GemmPrecision") != std::string::npos);
    g = w4a8_args(), g.workspace = buffer, g.workspace_bytes = 100 * 256;
    // (a size helper does not check buffers: gemm does; its check names the bytes W4A8 needs)
    CHECK(error_of(g) == "");
  }

  TEST_CASE("W4A8 on NVFP4 activations: workspace sizes in each mode, the GEMM kernel the BF16 call's, refusals") {
    GemmArgs g = fp4_w4a8_args();
    // W4A8 from 257 rows: the E4M3 rows and row scales (not W4A4's decoded A)
    CHECK(error_of(g) == "");
    CHECK(gemm_workspace_bytes(g) == 300 * 256 + 4 * 300);
    // at decode sizes the exact mode runs W4A4: its decoded A, rows * k * 2
    g.m = kW4A8ExactRows;
    CHECK(gemm_workspace_bytes(g) == kW4A8ExactRows * 256 * 2);
    CHECK(gemm_call(g, "test", false).args.precision == GemmPrecision::exact);
    // a given workspace is held to the mode's size, the message naming it
    g = fp4_w4a8_args(), g.workspace = buffer, g.workspace_bytes = 300 * 256;
    CHECK(gemm_error(g).find("workspace_bytes = 76800 is less than the 78000 bytes W4A8 needs") != std::string::npos);
    g.workspace_bytes = 300 * 256 + 4 * 300;
    CHECK(gemm_error(g).find("workspace_bytes") == std::string::npos);
    g.m = 200, g.workspace_bytes = 200 * 256;  // W4A8's size, but the exact mode needs W4A4's
    CHECK(gemm_error(g).find("workspace_bytes = 51200 is less than the 102400 bytes W4A4 needs") != std::string::npos);
    // the call keeps NVFP4 A (its activation pass's); its GEMM kernel is the BF16 W4A8 call's
    const GemmBackend& backend = *find_gemm_backend(Arch::sm_90a);
    for (ScaleLayout layout : {ScaleLayout::linear, ScaleLayout::swizzled128x4}) {
      g = fp4_w4a8_args(), g.a_fp4.scale_layout = layout;
      const GemmSpec fp4 = gemm_problem_on(Arch::sm_90a, gemm_call(g, "test", false));
      const GemmSpec bf16 = gemm_problem_on(Arch::sm_90a, gemm_call(w4a8_args(), "test", false));
      CHECK(fp4.a_dtype == uint8_t(DType::nvfp4));
      CHECK(gemm_problem_w4a8(fp4));
      CHECK(fp4 != bf16);  // (the warm dispatch's key: the pass differs)
      CHECK(gemm_fp8_problem(fp4) == bf16);
      CHECK(gemm_fp8_problem(bf16) == bf16);
      CHECK(backend.unsupported(gemm_fp8_problem(fp4)) == "");
      const GemmTile tile = backend.heuristic(bf16, 300, 132);
      CHECK(gemm_key(backend.kernel_spec(gemm_spec(gemm_fp8_problem(fp4), tile))) ==
            gemm_key(backend.kernel_spec(gemm_spec(bf16, tile))));
    }
    // the other archs refuse the mode as they do for BF16 A
    const GemmCall fp4_call = gemm_call(fp4_w4a8_args(), "test", false);
    for (Arch arch : {Arch::sm_100a, Arch::sm_120a})
      CHECK(find_gemm_backend(arch)->unsupported(gemm_fp8_problem(gemm_problem_on(arch, fp4_call))).find("native FP4") !=
            std::string::npos);
    // grouped: contiguous and masked sizes; a global scale per group; per row with row_index refused as in W4A4
    const int32_t* sizes = reinterpret_cast<const int32_t*>(buffer);
    GroupedGemmArgs ga;
    ga.gemm = fp4_w4a8_args(), ga.groups = 4, ga.group_ends = sizes, ga.expected_m = 512;
    ga.gemm.n = kW4A8GroupedLeastN;  // experts of fewer rows run the exact mode
    ga.gemm.a_fp4.global_scale = GlobalScale{0.0f, reinterpret_cast<const float*>(buffer), false};
    ga.a_global_scale_per_group = true;
    CHECK(grouped_gemm_workspace_bytes(ga) == 300 * 256 + 4 * 300);
    const GemmCall call = grouped_gemm_call(ga, "test", false);
    CHECK(call.a_gscale_mode == nvfp4k::GSCALE_DEVICE_PER_GROUP);
    // the GEMM reads the pass's row scales (the global scale folded in) as A's per-row scale
    CHECK(gemm_call_on_fp8_a(call, buffer).a_gscale_mode == nvfp4k::GSCALE_DEVICE_PER_ROW);
    ga.row_index = sizes, ga.a_rows = 1000;
    CHECK(grouped_gemm_workspace_bytes(ga) == 300 * 256 + 4 * 300);
    ga.expected_m = kW4A8GroupedExactRows;  // gathered at decode sizes: the exact mode, W4A4's decoded A
    CHECK(grouped_gemm_workspace_bytes(ga) == 300 * 256 * 2);
    ga.row_index = nullptr, ga.a_rows = 0, ga.expected_m = kW4A8GroupedExactRows;  // sorted: W4A4's decoded A
    CHECK(grouped_gemm_workspace_bytes(ga) == 300 * 256 * 2);
    ga.row_index = sizes, ga.a_rows = 1000;
    ga.a_global_scale_per_group = false, ga.gemm.a_fp4.global_scale.per_row = true, ga.expected_m = 512;
    CHECK(grouped_error(ga).find("per_row with row_index") != std::string::npos);
    ga.row_index = nullptr, ga.a_rows = 0, ga.group_ends = nullptr;
    ga.layout = GroupedLayout::masked, ga.masked_m = sizes, ga.gemm.m = 200;
    CHECK(grouped_gemm_workspace_bytes(ga) == 4 * 200 * 256 + 4 * 4 * 200);
    ga.layout = GroupedLayout::batched, ga.masked_m = nullptr;
    CHECK(grouped_error(ga).find("precision = w4a8 with the batched layout") != std::string::npos);
  }

  TEST_CASE("grouped W4A8: contiguous (gathered too) and masked sizes, the batched layout refused, expected_m's exact mode") {
    const int32_t* sizes = reinterpret_cast<const int32_t*>(buffer);
    GroupedGemmArgs ga;
    ga.gemm = w4a8_args(), ga.groups = 4, ga.group_ends = sizes, ga.expected_m = 512;
    ga.gemm.n = kW4A8GroupedLeastN;  // experts of fewer rows run the exact mode
    // contiguous: m rows
    CHECK(grouped_gemm_workspace_bytes(ga) == 300 * 256 + 4 * 300);
    GemmCall call = grouped_gemm_call(ga, "test", false);
    CHECK(call.args.precision == GemmPrecision::w4a8);
    CHECK(gemm_problem_w4a8(call.problem));
    // gathered: the sorted rows (the activation pass reads A's through row_index), the GEMM on them unindexed
    ga.row_index = sizes, ga.a_rows = 1000;
    CHECK(grouped_gemm_workspace_bytes(ga) == 300 * 256 + 4 * 300);
    const GemmCall inner = gemm_call_on_fp8_a(grouped_gemm_call(ga, "test", false), buffer);
    CHECK(inner.row_index == nullptr);
    CHECK(inner.a_stride == 256);
    CHECK(inner.a_gscale_mode == nvfp4k::GSCALE_DEVICE_PER_ROW);
    CHECK(reinterpret_cast<const unsigned char*>(inner.a_scale.device_ptr) == buffer + 300 * 256);
    // masked: every group's m rows
    ga.row_index = nullptr, ga.a_rows = 0;
    ga.layout = GroupedLayout::masked, ga.group_ends = nullptr, ga.masked_m = sizes, ga.gemm.m = 33;
    CHECK(grouped_gemm_workspace_bytes(ga) == (4 * 33 * 256 + 15) / 16 * 16 + 4 * 4 * 33);
    // rows per expert at or below kW4A8GroupedExactRows run the exact mode (no workspace)
    ga.expected_m = kW4A8GroupedExactRows;
    CHECK(grouped_gemm_workspace_bytes(ga) == 0);
    CHECK_FALSE(gemm_problem_w4a8(grouped_gemm_call(ga, "test", false).problem));
    ga.expected_m = kW4A8GroupedExactRows + 1;
    CHECK(gemm_problem_w4a8(grouped_gemm_call(ga, "test", false).problem));
    // gathered contiguous rows: the sorted rows' rule (the exact mode copies them first, where
    // W4A8's pass gathers them), its workspace the mode's
    GroupedGemmArgs gathered = ga;
    gathered.layout = GroupedLayout::contiguous, gathered.masked_m = nullptr, gathered.group_ends = sizes, gathered.gemm.m = 300;
    gathered.row_index = sizes, gathered.a_rows = 50, gathered.expected_m = kW4A8GroupedExactRows + 1;
    CHECK(gemm_problem_w4a8(grouped_gemm_call(gathered, "test", false).problem));
    CHECK(grouped_gemm_workspace_bytes(gathered) == 300 * 256 + 4 * 300);
    gathered.expected_m = kW4A8GroupedExactRows;
    CHECK_FALSE(gemm_problem_w4a8(grouped_gemm_call(gathered, "test", false).problem));
    CHECK(grouped_gemm_workspace_bytes(gathered) == 300 * 256 * 2);  // the rows copied first, BF16
    gathered.expected_m = kW4A8GroupedExactRows + 1, gathered.gemm.n = kW4A8GroupedLeastN - 1;
    CHECK_FALSE(gemm_problem_w4a8(grouped_gemm_call(gathered, "test", false).problem));
    CHECK(w4a8_runs_exact(false, kW4A8ExactRows, 64));
    CHECK_FALSE(w4a8_runs_exact(false, kW4A8ExactRows + 1, 64));
    // grouped rows on experts of fewer than kW4A8GroupedLeastN weight rows: the exact mode at any
    // rows per expert; dense calls do not look at n
    CHECK(w4a8_runs_exact(true, 4096, kW4A8GroupedLeastN - 1));
    CHECK_FALSE(w4a8_runs_exact(true, kW4A8GroupedExactRows + 1, kW4A8GroupedLeastN));
    ga.layout = GroupedLayout::batched, ga.masked_m = nullptr;
    try {
      grouped_gemm_workspace_bytes(ga);
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.status() == Status::unsupported);
      CHECK(std::string(e.what()).find("precision = w4a8 with the batched layout") != std::string::npos);
    }
    // the GEMM's checks name the grouped call's rows
    ga.layout = GroupedLayout::contiguous, ga.group_ends = sizes, ga.gemm.m = 300;
    ga.gemm.workspace = buffer, ga.gemm.workspace_bytes = 100;
    try {
      grouped_gemm_call(ga, "test");
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(std::string(e.what()).find("workspace_bytes = 100 is less than the 78000 bytes W4A8 needs") != std::string::npos);
    }
    // a call small enough to run the exact mode needs no W4A8 workspace (its size helper answers 0)
    ga.expected_m = kW4A8GroupedExactRows;
    CHECK(grouped_gemm_workspace_bytes(ga) == 0);
    CHECK_NOTHROW(grouped_gemm_call(ga, "test"));
  }

  TEST_CASE("grouped W4A8 on the backends: sm_90a takes contiguous and masked and the SwiGLU epilogue (NVFP4 D too), "
            "refuses the combine; its kernels keyed apart") {
    const GemmBackend& backend = *find_gemm_backend(Arch::sm_90a);
    GroupedGemmArgs ga;
    ga.gemm = w4a8_args(), ga.groups = 8, ga.group_ends = reinterpret_cast<const int32_t*>(buffer), ga.expected_m = 512;
    ga.gemm.n = kW4A8GroupedLeastN;  // experts of fewer rows run the exact mode
    const GemmSpec contiguous = gemm_problem_on(Arch::sm_90a, grouped_gemm_call(ga, "test", false));
    CHECK(backend.unsupported(contiguous) == "");
    ga.layout = GroupedLayout::masked, ga.masked_m = ga.group_ends, ga.group_ends = nullptr;
    const GemmSpec masked = gemm_problem_on(Arch::sm_90a, grouped_gemm_call(ga, "test", false));
    CHECK(backend.unsupported(masked) == "");
    GemmSpec batched = masked;
    batched.flags = uint16_t((batched.flags & ~kFlagGroupedMasked) | kFlagGroupedBatched);
    CHECK(backend.unsupported(batched).find("precision = w4a8") != std::string::npos);
    const GemmSpec swiglu = with_epilogue(contiguous, GemmEpilogue::swiglu);
    CHECK(backend.unsupported(swiglu) == "");
    GemmSpec swiglu_fp4 = swiglu;
    swiglu_fp4.out_dtype = uint8_t(DType::nvfp4);
    CHECK(backend.unsupported(swiglu_fp4) == "");
    CHECK(backend.kernel_name(gemm_spec(swiglu_fp4, backend.heuristic(swiglu_fp4, 512, 132))).find("nvfp4_gemm_w4a8_") == 0);
    CHECK(backend.unsupported(with_epilogue(contiguous, GemmEpilogue::moe_combine)).find("moe_combine epilogue") !=
          std::string::npos);
    for (Arch arch : {Arch::sm_100a, Arch::sm_120a})
      CHECK(find_gemm_backend(arch)->unsupported(gemm_problem_on(arch, grouped_gemm_call(ga, "test", false)))
                .find("native FP4") != std::string::npos);
    // keys and names: apart from the exact mode's, from each other, and from the dense kernel's
    const GemmSpec exact_contiguous = gemm_with_precision(contiguous, GemmPrecision::exact);
    CHECK_FALSE(gemm_problem_w4a8(exact_contiguous));
    const GemmTile tile = backend.heuristic(contiguous, 512, 132);
    const std::string name = backend.kernel_name(gemm_spec(contiguous, tile));
    CHECK(name.find("nvfp4_gemm_w4a8_") == 0);
    CHECK(name.find("e4m3") != std::string::npos);
    CHECK(name != backend.kernel_name(gemm_spec(exact_contiguous, tile)));
    CHECK(gemm_key(gemm_spec(contiguous, tile)) != gemm_key(gemm_spec(exact_contiguous, tile)));
    CHECK(gemm_key(gemm_spec(contiguous, tile)) != gemm_key(gemm_spec(masked, tile)));
    const GemmSpec dense = gemm_problem_on(Arch::sm_90a, gemm_call(w4a8_args(), "test", false));
    CHECK(gemm_key(gemm_spec(contiguous, tile)) != gemm_key(gemm_spec(dense, tile)));
    CHECK(backend.tile_problem(gemm_spec(contiguous, tile)) == "");
  }

  TEST_CASE("off sm_90a the mode is refused, saying the arch's exact mode is its native FP4 path") {
    const GemmCall call = gemm_call(w4a8_args(), "test", false);
    for (Arch arch : {Arch::sm_100a, Arch::sm_103a, Arch::sm_120a, Arch::sm_121a}) {
      CAPTURE(to_string(arch));
      const GemmBackend* backend = find_gemm_backend(arch);
      REQUIRE(backend);
      const std::string why = backend->unsupported(gemm_problem_on(arch, call));
      CHECK(why.find("precision = w4a8") != std::string::npos);
      CHECK(why.find("native FP4") != std::string::npos);
    }
    CHECK(find_gemm_backend(Arch::sm_90a)->unsupported(gemm_problem_on(Arch::sm_90a, call)) == "");
  }

  TEST_CASE("W4A8 kernels are keyed apart from the exact mode's; BF16 and FP16 activations share one") {
    GemmArgs g = w4a8_args();
    const GemmSpec w4a8 = gemm_problem_on(Arch::sm_90a, gemm_call(g, "test", false));
    g.precision = GemmPrecision::exact;
    const GemmSpec exact = gemm_problem_on(Arch::sm_90a, gemm_call(g, "test", false));
    CHECK(gemm_problem_w4a8(w4a8));
    CHECK_FALSE(gemm_problem_w4a8(exact));
    const GemmBackend& backend = *find_gemm_backend(Arch::sm_90a);
    const GemmTile tile = backend.heuristic(w4a8, 300, 132);
    CHECK(gemm_key(gemm_spec(w4a8, tile)) != gemm_key(gemm_spec(exact, tile)));
    CHECK(backend.kernel_name(gemm_spec(w4a8, tile)).find("nvfp4_gemm_w4a8_") == 0);
    CHECK(backend.kernel_name(gemm_spec(exact, tile)).find("nvfp4_gemm_w4a16_") == 0);
    GemmArgs h = w4a8_args();
    h.a_dtype = DType::fp16;
    const GemmSpec fp16 = gemm_problem_on(Arch::sm_90a, gemm_call(h, "test", false));
    CHECK(gemm_key(backend.kernel_spec(gemm_spec(fp16, tile))) == gemm_key(backend.kernel_spec(gemm_spec(w4a8, tile))));
    // the spec's JSON names the precision, and a JSON from before the mode reads as exact
    nlohmann::json j = gemm_spec_json(gemm_spec(w4a8, tile));
    CHECK(j["precision"] == "w4a8");
    GemmSpec back;
    CHECK(gemm_spec_from_json(j, Arch::sm_90a, &back) == "");
    CHECK(back == gemm_spec(w4a8, tile));
    j.erase("precision");
    CHECK(gemm_spec_from_json(j, Arch::sm_90a, &back) == "");
    CHECK_FALSE(gemm_problem_w4a8(back));
    j["precision"] = "fp8";
    CHECK(gemm_spec_from_json(j, Arch::sm_90a, &back).find("precision") != std::string::npos);
    // the activation pass's key: per K and A's dtype, NVFP4 A's per scale layout (16-bit A has none)
    CHECK(fp8_activations_spec(Arch::sm_90a, 256, DType::bf16) != fp8_activations_spec(Arch::sm_90a, 256, DType::fp16));
    CHECK(fp8_activations_spec(Arch::sm_90a, 256, DType::bf16) != fp8_activations_spec(Arch::sm_90a, 512, DType::bf16));
    const KernelSpec fp4_linear = fp8_activations_spec(Arch::sm_90a, 256, DType::nvfp4);
    const KernelSpec fp4_swizzled = fp8_activations_spec(Arch::sm_90a, 256, DType::nvfp4, ScaleLayout::swizzled128x4);
    CHECK(fp4_linear != fp4_swizzled);
    CHECK(fp4_linear != fp8_activations_spec(Arch::sm_90a, 256, DType::bf16));
    CHECK(fp8_activations_spec(Arch::sm_90a, 256, DType::bf16, ScaleLayout::swizzled128x4) ==
          fp8_activations_spec(Arch::sm_90a, 256, DType::bf16));
    const OpKernels& pass = op_kernels(Op::fp8_activations);
    CHECK(pass.kernel_name(fp8_activations_spec(Arch::sm_90a, 256, DType::bf16)) == "nvfp4_fp8_activations_k256_bf16");
    CHECK(pass.kernel_name(fp4_linear) == "nvfp4_fp8_activations_k256_nvfp4_linear");
    CHECK(pass.kernel_name(fp4_swizzled) == "nvfp4_fp8_activations_k256_nvfp4_sw128x4");
    CHECK(pass.to_json(fp4_swizzled).dump() == R"({"k":256,"a_dtype":"nvfp4","threads":256,"a_scales":"sw128x4"})");
    CHECK(pass.to_json(fp8_activations_spec(Arch::sm_90a, 256, DType::fp16)).dump() == R"({"k":256,"a_dtype":"fp16","threads":256})");
    const GeneratedKernel source = pass.generate(fp4_swizzled);
    CHECK(source.source.find("nvfp4k::fp8_activations_nvfp4<256LL, 1, 256>(p)") != std::string::npos);
  }

  TEST_CASE("the kernel's FP16 fold equals fp8_fold's for every row exponent, block scale and nibble") {
    using Fp16 = nvfp4k::Fp4Operand<nvfp4k::DTYPE_FP16>;
    int wrong = 0;
    for (int e = -15; e <= 3; ++e) {
      const nvfp4k::sm90::FoldRow row = nvfp4k::sm90::fold_row(e);
      for (unsigned s = 1; s < 0x7F; ++s) {
        const float scale = nvfp4k::e4m3_to_float(s);
        if (nvfp4k::fold_exponent(scale) > e) continue;  // a row of exponent e holds no larger scale
        bool nan = false;
        const unsigned code = nvfp4k::prepacked::scale_code((unsigned char)s, nan);
        const double q1 = fp16(nvfp4k::prepacked::scale_pair<nvfp4k::DTYPE_FP16>(code, false) + row.bias);
        const double factor = fp16(row.factor);
        for (unsigned nib = 0; nib < 16; ++nib) {
          const double placed = fp16(Fp16::place(nib) & 0xFFFF);  // e2m1 * 2^-14
          const double h1 = placed * q1;
          const double h1_16 = fp16(nvfp4k::float_to_fp16_bits(float(h1)));
          const double h2 = fp16(nvfp4k::float_to_fp16_bits(float(h1_16 * factor)));
          const unsigned char got = (unsigned char)(nvfp4k::float_to_e4m3_satfinite(float(std::fabs(h2))) |
                                                    (std::signbit(h2) ? 0x80 : 0));
          const unsigned char want = nvfp4k::fold_e2m1(nib, scale, e);
          if ((h1_16 != h1 || got != want) && wrong++ == 0)
            FAIL_CHECK("e " << e << ", scale " << scale << ", nibble " << nib << ": FP16 product " << h1 << " (as FP16 "
                            << h1_16 << "), E4M3 " << int(got) << ", fold_e2m1 " << int(want));
        }
      }
    }
    CHECK(wrong == 0);
  }

  TEST_CASE("activation columns are stored where the weight fragment's k32 registers hold them") {
    // thread tid's pair f of k16 step s (prepacked_weight.cuh) is register (f % 2) + 2 (s % 2) of
    // k32 step s / 2, bytes 2 (f / 2), +1: the activation byte there must hold the pair's columns
    for (int tid = 0; tid < 128; ++tid)
      for (int s = 0; s < 4; ++s)
        for (int f = 0; f < 4; ++f)
          for (int j = 0; j < 2; ++j) {
            const int column = 2 * nvfp4k::prepacked::source_byte(tid, s, f) + j;  // in the 64-k chunk
            const int position = 32 * (s / 2) + 16 * (s % 2) + 4 * (tid % 4) + 2 * (f / 2) + j;
            CHECK(32 * (s / 2) + 16 * (s % 2) + nvfp4k::fp8_activation_column(position % 16) == column);
          }
    bool seen[16] = {};
    for (int p = 0; p < 16; ++p) seen[nvfp4k::fp8_activation_column(p)] = true;
    for (bool b : seen) CHECK(b);
  }

  TEST_CASE("SASS of the W4A8 kernels: FP8 wgmmas on the folded weight, no local memory") {
    // the heuristic's prefill tiles, dense (M = 4096) and contiguous groups (512 rows an expert)
    const GemmBackend& backend = *find_gemm_backend(Arch::sm_90a);
    GemmArgs g = w4a8_args();
    g.n = 8192, g.k = 8192;
    const GemmSpec dense = gemm_problem_on(Arch::sm_90a, gemm_call(g, "test", false));
    GroupedGemmArgs ga;
    ga.gemm = w4a8_args(), ga.groups = 8, ga.group_ends = reinterpret_cast<const int32_t*>(buffer), ga.expected_m = 512;
    ga.gemm.n = 4096, ga.gemm.k = 7168;  // DeepSeek-V3's experts' gate_up
    const GemmSpec grouped = gemm_problem_on(Arch::sm_90a, grouped_gemm_call(ga, "test", false));
    const std::vector<GemmSpec> specs{gemm_spec(dense, backend.heuristic(dense, 4096, 132)),
                                      gemm_spec(grouped, backend.heuristic(grouped, 512 * ga.groups, 132))};
    for_each_disassembled(specs, [](const GemmSpec& spec, const std::string& name, const std::string& text) {
      CAPTURE(gemm_key(spec).describe());
      const Sass mma = parse_sass(text, name, "QGMMA");
      CHECK(mma.matches > 0);
      CHECK(parse_sass(text, name, ".E4M3.E4M3").matches == mma.matches);
      CHECK(mma.local_accesses == 0);
      // the fold: two E4M3 conversions (F2FP) a k32 register, four registers a wgmma and warpgroup
      const int fold = parse_sass(text, name, "F2FP.SATFINITE.E4M3").matches;
      MESSAGE(name << ": QGMMA " << mma.matches << ", F2FP E4M3 " << fold << ", HMUL2 " << parse_sass(text, name, "HMUL2").matches
                   << ", registers " << mma.registers);
      CHECK(fold == 8 * mma.matches);
    });
  }
}
