// The C API: status codes and the thread-local last-error message.
#include <doctest/doctest.h>

#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "core/driver.hpp"
#include "core/launcher.hpp"
#include "core/model_shapes.hpp"
#include "core/prewarm.hpp"
#include "nvfp4/jit.h"
#include "nvfp4/jit.hpp"
#include "test_util.hpp"

namespace {
std::string last_error() { return nvfp4_jit_last_error(); }
bool starts_with(const std::string& s, const std::string& head) { return s.compare(0, head.size(), head) == 0; }
}  // namespace

TEST_SUITE("c_api") {
  TEST_CASE("null args and bad arguments return a status and a message") {
    CHECK(nvfp4_jit_dequantize(nullptr, nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(std::string(nvfp4_jit_last_error()).find("args is null") != std::string::npos);

    nvfp4_dequantize_args a;
    nvfp4_dequantize_args_init(&a);
    a.k = 24;
    CHECK(nvfp4_jit_dequantize(&a, nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(std::string(nvfp4_jit_last_error()).find("k = 24") != std::string::npos);

    a.k = 32;
    a.out_dtype = NVFP4_DTYPE_NVFP4;
    CHECK(nvfp4_jit_dequantize(&a, nullptr) == NVFP4_UNSUPPORTED);

    CHECK(nvfp4_jit_rmsnorm_quantize(nullptr, nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(std::string(nvfp4_jit_last_error()).find("nvfp4_jit_rmsnorm_quantize: args is null") != std::string::npos);
    nvfp4_swiglu_quantize_args s;
    nvfp4_swiglu_quantize_args_init(&s);
    s.k = 64;
    s.interleave = 3;
    CHECK(nvfp4_jit_swiglu_quantize(&s, nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(std::string(nvfp4_jit_last_error()).find("interleave = 3") != std::string::npos);
    nvfp4_moe_stage_args m;
    nvfp4_moe_stage_args_init(&m);
    m.k = 64;
    m.out.scale_mode = NVFP4_GSCALE_COMPUTE_PER_TENSOR;
    CHECK(nvfp4_jit_moe_stage(&m, nullptr) == NVFP4_UNSUPPORTED);

    CHECK(nvfp4_jit_prepack(nullptr, nullptr) == NVFP4_INVALID_ARGUMENT);
    nvfp4_prepack_args p;
    nvfp4_prepack_args_init(&p);
    p.n = 64, p.k = 100;
    CHECK(nvfp4_jit_prepack(&p, nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(std::string(nvfp4_jit_last_error()).find("nvfp4_jit_prepack: k = 100") == 0);  // the C function's name
    CHECK(nvfp4_jit_prepacked_bytes(128, 256) == 2 * 4 * 2304 + 2 * 128);
    CHECK(nvfp4_jit_prepacked_bytes(128, 100) == -1);
    nvfp4_gemm_args g;
    nvfp4_gemm_args_init(&g);
    g.n = 64, g.k = 256, g.b_prepacked = 1, g.b.scale_layout = nvfp4_scale_layout(9);  // unused when prepacked
    CHECK(nvfp4_jit_gemm(&g, nullptr) == NVFP4_OK);                                  // m = 0: validated, no work
    // the SwiGLU epilogue reaches the C++ call: n = 72 is no gate_up weight of I % 8 == 0
    CHECK(g.epilogue == NVFP4_GEMM_EPILOGUE_NONE);
    g.epilogue = NVFP4_GEMM_EPILOGUE_SWIGLU;
    CHECK(nvfp4_jit_gemm(&g, nullptr) == NVFP4_OK);
    g.n = 72;
    CHECK(nvfp4_jit_gemm(&g, nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(std::string(nvfp4_jit_last_error()).find("nvfp4_jit_gemm: n = 72 with epilogue swiglu") == 0);
    // and the stored weight's gate / up order (0: halves, the default; g a power of two dividing I)
    CHECK(g.b_swiglu_interleave == 0);
    g.n = 64, g.b_prepacked = 0, g.b.scale_layout = NVFP4_SCALES_LINEAR, g.b_swiglu_interleave = 4;
    CHECK(nvfp4_jit_gemm(&g, nullptr) == NVFP4_OK);  // m = 0: validated, no work
    g.b_swiglu_interleave = 12;
    CHECK(nvfp4_jit_gemm(&g, nullptr) == NVFP4_UNSUPPORTED);
    CHECK(std::string(nvfp4_jit_last_error()).find("nvfp4_jit_gemm: b_swiglu_interleave = 12: a gate_up weight as stored") == 0);
    g.b_swiglu_interleave = 0;
    CHECK(nvfp4_jit_gemm(&g, nullptr) == NVFP4_OK);  // m = 0: validated, no work
    // RMSNorm of A reaches the C++ call: none by default, eps 1e-6; its checks name the fields
    CHECK(g.a_rmsnorm_weight == nullptr);
    CHECK(g.a_rmsnorm_weight_fp32 == 0);
    CHECK(g.a_rmsnorm_eps == 1e-6f);
    static const uint16_t norm_weight[256] = {};
    g.a_rmsnorm_weight = norm_weight, g.a_rmsnorm_weight_fp32 = 1;
    CHECK(nvfp4_jit_gemm(&g, nullptr) == NVFP4_OK);
    g.a_rmsnorm_eps = 0.0f;
    CHECK(nvfp4_jit_gemm(&g, nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(std::string(nvfp4_jit_last_error()).find("nvfp4_jit_gemm: a_rmsnorm_eps = 0 must be positive and finite") == 0);
    g.a_rmsnorm_eps = 1e-6f, g.precision = NVFP4_GEMM_W4A8, g.b_prepacked = 1;
    CHECK(nvfp4_jit_gemm(&g, nullptr) == NVFP4_UNSUPPORTED);
    CHECK(std::string(nvfp4_jit_last_error()).find("nvfp4_jit_gemm: a_rmsnorm_weight with precision = w4a8") == 0);
    g.a_rmsnorm_weight = nullptr;
    CHECK(nvfp4_jit_gemm(&g, nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(std::string(nvfp4_jit_last_error()).find("nvfp4_jit_gemm: a_rmsnorm_weight_fp32 is set but a_rmsnorm_weight is null") ==
          0);
    g.a_rmsnorm_weight_fp32 = 0, g.precision = NVFP4_GEMM_EXACT, g.b_prepacked = 0;
    // and the residual add: none by default; its stride checked against n
    CHECK(g.residual == nullptr);
    CHECK(g.residual_row_stride == 0);
    g.residual = norm_weight, g.residual_row_stride = 32;
    CHECK(nvfp4_jit_gemm(&g, nullptr) == NVFP4_UNSUPPORTED);  // with epilogue swiglu (set above)
    CHECK(std::string(nvfp4_jit_last_error()).find("nvfp4_jit_gemm: residual with a fused epilogue") == 0);
    g.epilogue = NVFP4_GEMM_EPILOGUE_NONE;
    CHECK(nvfp4_jit_gemm(&g, nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(std::string(nvfp4_jit_last_error()).find("nvfp4_jit_gemm: residual_row_stride = 32 is less than n = 64") == 0);
    g.residual_row_stride = 0;
    CHECK(nvfp4_jit_gemm(&g, nullptr) == NVFP4_OK);
    g.residual = nullptr;
    g.b_prepacked = 1, g.b.scale_layout = nvfp4_scale_layout(9);
    g.n = 64, g.epilogue = NVFP4_GEMM_EPILOGUE_NONE;
    p.k = 256, p.n = 24, p.swiglu_interleave = 0;  // and prepack's gate / up order
    CHECK(nvfp4_jit_prepack(&p, nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(std::string(nvfp4_jit_last_error()).find("nvfp4_jit_prepack: n = 24 with swiglu_interleave") == 0);
    g.b_prepacked = 0;
    CHECK(nvfp4_jit_gemm(&g, nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(nvfp4_jit_grouped_gemm(nullptr, nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(std::string(nvfp4_jit_last_error()).find("nvfp4_jit_grouped_gemm: args is null") != std::string::npos);
    nvfp4_grouped_gemm_args e;
    nvfp4_grouped_gemm_args_init(&e);
    e.gemm = g;
    e.gemm.b_prepacked = 1;
    e.layout = NVFP4_GROUPED_MASKED;
    CHECK(nvfp4_jit_grouped_gemm(&e, nullptr) == NVFP4_INVALID_ARGUMENT);  // groups = 0
    CHECK(std::string(nvfp4_jit_last_error()).find("groups = 0 must be positive") != std::string::npos);
    e.groups = 8;
    CHECK(nvfp4_jit_grouped_gemm(&e, nullptr) == NVFP4_OK);  // m = 0: validated, no work
    e.gemm.a_dtype = NVFP4_DTYPE_NVFP4, e.gemm.m = 4, e.gemm.a = nullptr;
    CHECK(nvfp4_jit_grouped_gemm_workspace_bytes(&e) == 8 * 4 * 256 * 2);  // grouped W4A4: A decoded first
    e.gemm.m = 100;
    CHECK(nvfp4_jit_grouped_gemm_workspace_bytes(&e) == 8 * 100 * 256 * 2);  // A decoded first
    e.gemm.m = 16;
    e.groups = -1;
    CHECK(nvfp4_jit_grouped_gemm_workspace_bytes(&e) == -1);
    // batched: the group strides reach the C++ call (an odd one is named)
    e.groups = 8, e.layout = NVFP4_GROUPED_BATCHED, e.gemm.a_dtype = NVFP4_DTYPE_BF16, e.gemm.a = g.a;
    e.a_group_stride = 12;
    CHECK(nvfp4_jit_grouped_gemm(&e, nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(std::string(nvfp4_jit_last_error()).find("a_group_stride = 12 must be a multiple of 8") != std::string::npos);
    e.a_group_stride = 0, e.d_group_stride = 1;
    CHECK(nvfp4_jit_grouped_gemm(&e, nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(std::string(nvfp4_jit_last_error()).find("makes rows of D overlap") != std::string::npos);
    // W4A8 grouped (gemm.precision): the workspace of every masked group's rows, past the exact mode's
    // expected_m (on experts of 4096 rows: fewer run the exact mode); the batched layout refused
    e.d_group_stride = 0, e.layout = NVFP4_GROUPED_MASKED, e.gemm.precision = NVFP4_GEMM_W4A8, e.gemm.b_prepacked = 1;
    e.expected_m = 512, e.gemm.n = 4096;
    CHECK(nvfp4_jit_grouped_gemm_workspace_bytes(&e) == 8 * 16 * 256 + 4 * 8 * 16);
    // on NVFP4 A (W4A4 input) the same E4M3 rows; at the exact mode's expected_m, W4A4's decoded A
    e.gemm.a_dtype = NVFP4_DTYPE_NVFP4, e.gemm.a = nullptr, e.gemm.a_fp4.data = e.gemm.a_fp4.scales = g.a;
    CHECK(nvfp4_jit_grouped_gemm_workspace_bytes(&e) == 8 * 16 * 256 + 4 * 8 * 16);
    e.expected_m = 32;
    CHECK(nvfp4_jit_grouped_gemm_workspace_bytes(&e) == 8 * 16 * 256 * 2);
    e.expected_m = 512, e.gemm.a_dtype = NVFP4_DTYPE_BF16, e.gemm.a = g.a;
    e.gemm.a_fp4.data = e.gemm.a_fp4.scales = nullptr;
    e.layout = NVFP4_GROUPED_BATCHED;
    CHECK(nvfp4_jit_grouped_gemm_workspace_bytes(&e) == -1);
    CHECK(std::string(nvfp4_jit_last_error()).find("precision = w4a8 with the batched layout") != std::string::npos);
    // the MoE combine epilogue: its arguments reach the C++ call and its counter size
    nvfp4_grouped_gemm_args c;
    nvfp4_grouped_gemm_args_init(&c);
    CHECK(c.combine.weights_dtype == NVFP4_DTYPE_FP32);
    CHECK(c.combine.out_dtype == NVFP4_DTYPE_BF16);
    CHECK(c.combine.counters == nullptr);
    c.gemm = g, c.gemm.b_prepacked = 1, c.gemm.n = 200, c.groups = 8;
    c.gemm.epilogue = NVFP4_GEMM_EPILOGUE_MOE_COMBINE;
    c.combine.tokens = 3, c.combine.topk = 2;
    CHECK(nvfp4_jit_moe_combine_counter_bytes(&c) == 3 * 4 * 4);  // 3 tokens x ceil(200 / 64) x 4 bytes
    c.combine.out_row_stride = 100;
    CHECK(nvfp4_jit_moe_combine_counter_bytes(&c) == -1);
    CHECK(std::string(nvfp4_jit_last_error()).find("combine.out_row_stride = 100 is less than gemm.n = 200") != std::string::npos);
    c.combine.out_row_stride = 0, c.layout = NVFP4_GROUPED_MASKED;
    CHECK(nvfp4_jit_grouped_gemm(&c, nullptr) == NVFP4_UNSUPPORTED);
    CHECK(std::string(nvfp4_jit_last_error()).find("gemm.epilogue moe_combine needs the contiguous layout") != std::string::npos);
  }

  TEST_CASE("the last error is per thread, and a success clears it") {
    nvfp4_jit_dequantize(nullptr, nullptr);
    std::string other = "unset";
    std::thread([&] { other = nvfp4_jit_last_error(); }).join();
    CHECK(other.empty());
    nvfp4_dequantize_args a;
    nvfp4_dequantize_args_init(&a);
    a.k = 32;  // zero rows: a valid no-op
    CHECK(nvfp4_jit_dequantize(&a, nullptr) == NVFP4_OK);
    CHECK(std::string(nvfp4_jit_last_error()).empty());
    CHECK(std::string(nvfp4_jit_version()).size() > 0);
  }

  TEST_CASE("nvrtc_info: the C++ form's NVRTC; NULL is refused") {
    const nvfp4::jit::NvrtcInfo cpp = nvfp4::jit::nvrtc_info();
    REQUIRE_MESSAGE(cpp.error.empty(), cpp.error);
    nvfp4_nvrtc_info c{};
    REQUIRE(nvfp4_jit_nvrtc_info(&c) == NVFP4_OK);
    CHECK(c.path == cpp.path);
    CHECK(c.version == cpp.version);
    CHECK(c.source == cpp.source);
    CHECK(std::string(c.error).empty());
    CHECK(nvfp4_jit_nvrtc_info(nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(std::string(nvfp4_jit_last_error()) == "nvfp4_jit_nvrtc_info: info must not be NULL");
  }

  TEST_CASE("args_init gives the C++ defaults") {
    namespace j = nvfp4::jit;
    nvfp4_gemm_args g;
    std::memset(&g, 0x5A, sizeof g);
    nvfp4_gemm_args_init(&g);
    const j::GemmArgs gd;
    CHECK(g.alpha == gd.alpha);
    CHECK(g.alpha == 1.0f);
    CHECK(g.b.global_scale.value == 1.0f);
    CHECK(g.a_fp4.global_scale.value == 1.0f);
    CHECK(g.b.global_scale.device_ptr == nullptr);
    CHECK(g.a_dtype == NVFP4_DTYPE_BF16);
    CHECK(g.bias_dtype == NVFP4_DTYPE_BF16);
    CHECK(g.m == 0);
    CHECK(g.workspace == nullptr);
    CHECK(g.weights_static == 0);
    nvfp4_grouped_gemm_args e;
    std::memset(&e, 0x5A, sizeof e);
    nvfp4_grouped_gemm_args_init(&e);
    CHECK(e.layout == NVFP4_GROUPED_CONTIGUOUS);
    CHECK(e.gemm.alpha == 1.0f);
    CHECK(e.groups == 0);
    CHECK(e.row_index == nullptr);
    CHECK(e.a_global_scale_per_group == 0);
    CHECK(e.a_group_stride == 0);
    CHECK(e.d_group_stride == 0);
    nvfp4_rmsnorm_quantize_args r;
    nvfp4_rmsnorm_quantize_args_init(&r);
    CHECK(r.eps == j::RmsNormQuantizeArgs{}.eps);
    CHECK(r.out.global_scale.value == 1.0f);
    CHECK(r.out.scale_mode == NVFP4_GSCALE_GIVEN);
    nvfp4_quantize_args q;
    nvfp4_quantize_args_init(&q);
    CHECK(q.global_scale.value == 1.0f);
    nvfp4_convert_scales_args c;
    nvfp4_convert_scales_args_init(&c);
    CHECK(c.src_layout == NVFP4_SCALES_LINEAR);
    CHECK(c.dst_layout == NVFP4_SCALES_SWIZZLED128X4);
    nvfp4_dequantize_args d;
    nvfp4_dequantize_args_init(&d);
    CHECK(d.src.global_scale.value == 1.0f);
    nvfp4_moe_stage_args m;
    nvfp4_moe_stage_args_init(&m);
    CHECK(m.out.global_scale.value == 1.0f);
    CHECK(m.topk_ids_type == NVFP4_INDEX_INT32);
    CHECK(m.topk_ids_out_type == NVFP4_INDEX_INT32);
    nvfp4_mhc_rmsnorm_quantize_args h;
    std::memset(&h, 0x5A, sizeof h);
    nvfp4_mhc_rmsnorm_quantize_args_init(&h);
    CHECK(h.eps == j::MhcRmsNormQuantizeArgs{}.eps);
    CHECK(h.out.global_scale.value == 1.0f);
    CHECK(h.weight_fp32 == 0);
    CHECK(h.h == nullptr);
    nvfp4_moe_route_args mr;
    std::memset(&mr, 0x5A, sizeof mr);
    nvfp4_moe_route_args_init(&mr);
    CHECK(mr.topk_ids_type == NVFP4_INDEX_INT32);
    CHECK(mr.groups == 0);
    CHECK(mr.positions == nullptr);
    nvfp4_moe_combine_args mc;
    std::memset(&mc, 0x5A, sizeof mc);
    nvfp4_moe_combine_args_init(&mc);
    CHECK(mc.d_dtype == NVFP4_DTYPE_BF16);
    CHECK(mc.weights_dtype == NVFP4_DTYPE_FP32);
    CHECK(mc.out_dtype == NVFP4_DTYPE_BF16);
    CHECK(mc.tokens == 0);
    nvfp4_swiglu_quantize_args s;
    nvfp4_swiglu_quantize_args_init(&s);
    CHECK(s.out.global_scale.value == 1.0f);
    nvfp4_prepack_args p;
    nvfp4_prepack_args_init(&p);
    CHECK(p.weight.global_scale.value == 1.0f);
    CHECK(p.swiglu_interleave == -1);
    nvfp4_modelopt_linear l;
    std::memset(&l, 0x5A, sizeof l);
    nvfp4_modelopt_linear_init(&l);
    CHECK(l.n == 0);
    CHECK(l.weight == nullptr);
    CHECK(l.weight_scale_2.value == 1.0f);
    CHECK(l.input_scale.device_ptr == nullptr);
    nvfp4_dequantize_args_init(nullptr);  // a null pointer is left alone
  }

  TEST_CASE("load_modelopt: a null layer or output, and a bad layer, refused by the C function's name") {
    alignas(64) static unsigned char buffer[256];
    nvfp4_modelopt_linear l;
    nvfp4_modelopt_linear_init(&l);
    l.n = 64, l.k = 48, l.weight = buffer, l.weight_scale = buffer + 64;
    nvfp4_linear out;
    CHECK(nvfp4_jit_load_modelopt(nullptr, buffer, nullptr, -1, &out) == NVFP4_INVALID_ARGUMENT);
    CHECK(starts_with(last_error(), "nvfp4_jit_load_modelopt: layer is null"));
    CHECK(nvfp4_jit_load_modelopt(&l, buffer, nullptr, -1, nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(starts_with(last_error(), "nvfp4_jit_load_modelopt: out is null"));
    CHECK(nvfp4_jit_load_modelopt(&l, buffer, nullptr, -1, &out) == NVFP4_INVALID_ARGUMENT);
    CHECK(starts_with(last_error(), "nvfp4_jit_load_modelopt: k = 48 must be a positive multiple of 32"));
  }

  TEST_CASE("a zero-filled struct does not compute: a global scale or alpha of 0 names the init function") {
    nvfp4_dequantize_args d;
    std::memset(&d, 0, sizeof d);
    d.k = 32;  // zero rows, otherwise a valid no-op
    CHECK(nvfp4_jit_dequantize(&d, nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(starts_with(last_error(), "nvfp4_jit_dequantize: src.global_scale.value = 0 must be positive and finite"));
    CHECK(last_error().find("nvfp4_*_args_init()") != std::string::npos);

    nvfp4_gemm_args g;
    std::memset(&g, 0, sizeof g);
    g.n = 64, g.k = 256, g.b.global_scale.value = 1.0f;
    CHECK(nvfp4_jit_gemm(&g, nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(starts_with(last_error(), "nvfp4_jit_gemm: alpha = 0 must be finite and nonzero"));
    CHECK(last_error().find("nvfp4_gemm_args_init()") != std::string::npos);
    g.b.global_scale.value = 0.0f, g.alpha = 1.0f;
    CHECK(nvfp4_jit_gemm(&g, nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(last_error().find("b.global_scale.value = 0 must be positive") != std::string::npos);
    g.b.global_scale.value = -1.0f;
    CHECK(nvfp4_jit_gemm(&g, nullptr) == NVFP4_INVALID_ARGUMENT);

    nvfp4_convert_scales_args c;
    nvfp4_convert_scales_args_init(&c);
    c.k = 64;
    CHECK(nvfp4_jit_convert_scales(&c, nullptr) == NVFP4_OK);  // zero rows
  }

  TEST_CASE("size helpers with huge sizes return -1 and say why, in C and C++") {
    constexpr int64_t huge = INT64_MAX / 2;
    CHECK(nvfp4_jit_scale_bytes(NVFP4_SCALES_LINEAR, huge, 1 << 20) == -1);
    CHECK(starts_with(last_error(), "nvfp4_jit_scale_bytes: scale_bytes(rows, k) does not fit in 64 bits"));
    CHECK(nvfp4_jit_scale_bytes(NVFP4_SCALES_SWIZZLED128X4, INT64_MAX, 16) == -1);
    CHECK(nvfp4_jit_scale_bytes(NVFP4_SCALES_LINEAR, 1000, int64_t(1) << 40) == -1);
    CHECK(last_error().find("k = 1099511627776 is out of range") != std::string::npos);
    CHECK(nvfp4_jit_scale_bytes(NVFP4_SCALES_SWIZZLED128X4, 129, 64) == 256 * 4);  // still right where it fits
    CHECK_THROWS_AS(nvfp4::jit::scale_bytes(nvfp4::jit::ScaleLayout::linear, huge, 1 << 20), nvfp4::jit::Error);

    CHECK(nvfp4_jit_prepacked_bytes(int64_t(1) << 40, 256) == -1);
    CHECK(starts_with(last_error(), "nvfp4_jit_prepacked_bytes: n = 1099511627776 is out of range"));

    nvfp4_gemm_args g;
    nvfp4_gemm_args_init(&g);
    g.n = 64, g.k = 256, g.a_dtype = NVFP4_DTYPE_NVFP4, g.m = huge;
    CHECK(nvfp4_jit_gemm_workspace_bytes(&g) == -1);
    CHECK(starts_with(last_error(), "nvfp4_jit_gemm_workspace_bytes: workspace (rows * k * 2) does not fit in 64 bits"));
    nvfp4::jit::GemmArgs cg;
    cg.n = 64, cg.k = 256, cg.a_dtype = nvfp4::jit::DType::nvfp4, cg.m = huge;
    CHECK_THROWS_AS(nvfp4::jit::gemm_workspace_bytes(cg), nvfp4::jit::Error);
    g.m = 100;
    CHECK(nvfp4_jit_gemm_workspace_bytes(&g) == 100 * 256 * 2);
    g.m = 4;
    CHECK(nvfp4_jit_gemm_workspace_bytes(&g) == 0);  // W4A4 in one launch
    nvfp4_grouped_gemm_args e;
    nvfp4_grouped_gemm_args_init(&e);
    e.gemm = g, e.groups = 1 << 30, e.layout = NVFP4_GROUPED_MASKED, e.gemm.m = int64_t(1) << 33;
    CHECK(nvfp4_jit_grouped_gemm_workspace_bytes(&e) == -1);  // the grouped call's own rows limit
    CHECK(starts_with(last_error(), "nvfp4_jit_grouped_gemm_workspace_bytes: gemm.m = 8589934592 rows in each of"));
    g.n = int64_t(1) << 40;  // N is range-checked, not truncated
    CHECK(nvfp4_jit_gemm(&g, nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(last_error().find("n = 1099511627776 is out of range") != std::string::npos);
  }

  TEST_CASE("workspace helpers check every argument the call does; byte offsets past 64 bits are refused before the device") {
    alignas(16) static unsigned char buffer[4096];
    nvfp4_gemm_args g;
    nvfp4_gemm_args_init(&g);
    g.m = 16, g.n = 64, g.k = 256;
    CHECK(nvfp4_jit_gemm_workspace_bytes(&g) == 0);  // W4A16: none
    g.a_dtype = nvfp4_dtype(77);
    CHECK(nvfp4_jit_gemm_workspace_bytes(&g) == -1);
    CHECK(starts_with(last_error(), "nvfp4_jit_gemm_workspace_bytes: a_dtype = 77 is not supported here"));
    g.a_dtype = NVFP4_DTYPE_BF16, g.n = -5;
    CHECK(nvfp4_jit_gemm_workspace_bytes(&g) == -1);
    CHECK(starts_with(last_error(), "nvfp4_jit_gemm_workspace_bytes: n = -5 must be positive"));
    g.n = 64, g.d_row_stride = 32;
    CHECK(nvfp4_jit_gemm_workspace_bytes(&g) == -1);
    CHECK(starts_with(last_error(), "nvfp4_jit_gemm_workspace_bytes: d_row_stride = 32 is less than n = 64"));
    g.d_row_stride = 0;
    {  // NVFP4 D: d_fp4 reaches the C++ checks field by field
      nvfp4_gemm_args f = g;
      f.d_dtype = NVFP4_DTYPE_NVFP4, f.epilogue = NVFP4_GEMM_EPILOGUE_SWIGLU, f.b_prepacked = 1;
      f.d_fp4.scale_layout = NVFP4_SCALES_SWIZZLED128X4;
      CHECK(nvfp4_jit_gemm_workspace_bytes(&f) == -1);  // n/2 = 32 columns: swizzled scales need 64
      CHECK(starts_with(last_error(), "nvfp4_jit_gemm_workspace_bytes: n = 64 with d_dtype nvfp4: D's n/2 = 32 columns must be "
                                      "a multiple of 64"));
      f.d_fp4.scale_layout = NVFP4_SCALES_LINEAR, f.d_fp4.row_stride_bytes = 18;
      CHECK(nvfp4_jit_gemm_workspace_bytes(&f) == -1);
      CHECK(starts_with(last_error(), "nvfp4_jit_gemm_workspace_bytes: d_fp4.row_stride_bytes = 18 must be at least n/4 = 16"));
      f.d_fp4.row_stride_bytes = 0, f.d_fp4.scale_mode = NVFP4_GSCALE_COMPUTE_PER_ROW;
      CHECK(nvfp4_jit_gemm_workspace_bytes(&f) == -1);
      CHECK(starts_with(last_error(), "nvfp4_jit_gemm_workspace_bytes: d_fp4.scale_mode must be given"));
      f.d_fp4.scale_mode = NVFP4_GSCALE_GIVEN;
      CHECK(nvfp4_jit_gemm_workspace_bytes(&f) == 0);
    }
    nvfp4_grouped_gemm_args e;
    nvfp4_grouped_gemm_args_init(&e);
    e.gemm = g, e.gemm.a_dtype = NVFP4_DTYPE_NVFP4, e.groups = 8, e.layout = nvfp4_grouped_layout(0);
    CHECK(nvfp4_jit_grouped_gemm_workspace_bytes(&e) == -1);
    CHECK(starts_with(last_error(), "nvfp4_jit_grouped_gemm_workspace_bytes: layout = 0 is not a GroupedLayout"));
    e.layout = NVFP4_GROUPED_MASKED, e.gemm.m = 100;
    CHECK(nvfp4_jit_grouped_gemm_workspace_bytes(&e) == 8 * 100 * 256 * 2);  // no buffer needed to ask
    e.gemm.n = -5;
    CHECK(nvfp4_jit_grouped_gemm_workspace_bytes(&e) == -1);
    CHECK(last_error().find("n = -5 must be positive") != std::string::npos);

    // every argument valid, the buffers real: validation passes, and the call fails only at the
    // device (no GPU here) or runs (on one); sizes whose offsets pass 2^63 bytes never get there
    g.a = buffer, g.b.data = buffer, g.b.scales = buffer, g.d = buffer;
    auto refused = [&](const nvfp4_gemm_args& args, const std::string& part) {
      const nvfp4_status status = nvfp4_jit_gemm(&args, nullptr);
      CAPTURE(last_error());
      CHECK(status == NVFP4_INVALID_ARGUMENT);
      CHECK(starts_with(last_error(), "nvfp4_jit_gemm: "));
      CHECK(last_error().find(part) != std::string::npos);
    };
    nvfp4_gemm_args h = g;
    h.m = INT64_MAX;
    refused(h, "m = 9223372036854775807 rows of a_row_stride = 256");
    h = g, h.d_row_stride = INT64_MAX;
    refused(h, "d_row_stride = 9223372036854775807");
    h = g, h.m = 1, h.d_row_stride = INT64_MAX / 2 + 1;  // its one row fits in elements, not in bytes
    refused(h, "d_row_stride = 4611686018427387904");
    h = g, h.b.row_stride_bytes = int64_t(1) << 62;
    refused(h, "b.row_stride_bytes = 4611686018427387904");
    h = g, h.a_row_stride = int64_t(1) << 60;
    refused(h, "a_row_stride = 1152921504606846976");
    CHECK(nvfp4_jit_gemm_workspace_bytes(&h) == -1);  // the size helper refuses them too
    CHECK(last_error().find("a_row_stride = 1152921504606846976") != std::string::npos);

    // dequantize and quantize, on the same rule
    nvfp4_dequantize_args d;
    nvfp4_dequantize_args_init(&d);
    d.src.data = buffer, d.src.scales = buffer, d.out = buffer, d.src_rows = 2, d.k = 32;
    d.out_row_stride = int64_t(1) << 62;
    CHECK(nvfp4_jit_dequantize(&d, nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(starts_with(last_error(), "nvfp4_jit_dequantize: out: rows = 2 rows of out_row_stride = 4611686018427387904"));
    d.out_row_stride = 0, d.src_rows = INT64_MAX;
    CHECK(nvfp4_jit_dequantize(&d, nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(starts_with(last_error(), "nvfp4_jit_dequantize: src.data: src_rows = 9223372036854775807 rows"));
    nvfp4_quantize_args q;
    nvfp4_quantize_args_init(&q);
    q.in = buffer, q.out = buffer, q.scales = buffer, q.rows = 2, q.k = 32;
    q.in_row_stride = int64_t(1) << 62;
    CHECK(nvfp4_jit_quantize(&q, nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(starts_with(last_error(), "nvfp4_jit_quantize: in: rows = 2 rows of in_row_stride = 4611686018427387904"));
    q.in_row_stride = 0, q.out_row_stride_bytes = INT64_MAX;
    CHECK(nvfp4_jit_quantize(&q, nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(starts_with(last_error(), "nvfp4_jit_quantize: out: rows = 2 rows of out_row_stride_bytes = 9223372036854775807"));
  }

  TEST_CASE("no GPU has its own status") {
    if (nvfp4::jit::detail::driver_available()) return;  // this case is about machines without one
    alignas(16) static unsigned char buffer[4096];
    nvfp4_dequantize_args d;
    nvfp4_dequantize_args_init(&d);
    d.src.data = buffer, d.src.scales = buffer, d.out = buffer, d.src_rows = 1, d.rows = 1, d.k = 32;
    CHECK(nvfp4_jit_dequantize(&d, nullptr) == NVFP4_NO_DEVICE);
    CHECK(starts_with(last_error(), "nvfp4_jit_dequantize: CUDA driver unavailable"));
  }
}

TEST_SUITE("c_api") {
  TEST_CASE("prewarm through the C API fills the cache; its arguments are checked") {
    nvfp4_prewarm_args p;
    nvfp4_prewarm_args_init(&p);
    CHECK(p.sm_count == 0);
    CHECK(p.manifest == nullptr);
    const int64_t shapes[] = {8, 64, 1};
    p.shapes = shapes, p.num_shapes = 1, p.archs = "sm_90a", p.threads = 1;
    nvfp4_prewarm_result r;
    std::memset(&r, 0xFF, sizeof r);
    REQUIRE(nvfp4_jit_prewarm(&p, &r) == NVFP4_OK);
    namespace d = nvfp4::jit::detail;
    CHECK(r.kernels == int64_t(d::prewarm_specs({d::parse_shape("8,64")}, {d::Arch::sm_90a}).size()));
    CHECK(r.compiled + r.cached == r.kernels);
    CHECK(r.failed == 0);
    CHECK(r.loaded == 0);  // nothing asked to load
    CHECK(p.variants == nullptr);
    CHECK(p.load == 0);
    // variants as a manifest line's fields; these are a subset of the defaults, so all cached
    const int64_t all = r.kernels;
    p.variants = "b-layout=linear in-dtype=bf16";
    REQUIRE(nvfp4_jit_prewarm(&p, &r) == NVFP4_OK);
    d::PrewarmVariants v;
    REQUIRE(d::set_prewarm_variants(v, p.variants).empty());
    CHECK(r.kernels == int64_t(d::prewarm_specs({d::parse_shape("8,64", v)}, {d::Arch::sm_90a}).size()));
    CHECK(r.kernels < all);
    CHECK(r.compiled == 0);
    p.variants = "bias=fp16";
    CHECK(nvfp4_jit_prewarm(&p, nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(starts_with(last_error(), "nvfp4_jit_prewarm: variants: bias: `fp16` is not one of none, bf16, fp32"));
    p.variants = nullptr;

    const int64_t bad_k[] = {8, 64, 1, 8, 40, 1};
    p.shapes = bad_k, p.num_shapes = 2;
    CHECK(nvfp4_jit_prewarm(&p, &r) == NVFP4_INVALID_ARGUMENT);
    CHECK(starts_with(last_error(), "nvfp4_jit_prewarm: shapes[1]: K = 40 must be a positive multiple of 16"));
    p.shapes = shapes, p.num_shapes = 1, p.archs = "sm_90a,sm_80";
    CHECK(nvfp4_jit_prewarm(&p, nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(last_error().find("`sm_80`") != std::string::npos);
    p.archs = "sm_90a", p.manifest = "no-such-model";
    CHECK(nvfp4_jit_prewarm(&p, nullptr) == NVFP4_INVALID_ARGUMENT);
    p.manifest = nullptr, p.num_shapes = 0;
    CHECK(nvfp4_jit_prewarm(&p, nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(last_error().find("no weight shapes") != std::string::npos);
    if (!nvfp4::jit::detail::driver_available()) {  // no arch given and no GPU to take it from
      p.shapes = shapes, p.num_shapes = 1, p.archs = nullptr;
      CHECK(nvfp4_jit_prewarm(&p, nullptr) == NVFP4_NO_DEVICE);
      p.archs = "sm_90a", p.load = 1;  // archs given, but no context to load into
      CHECK(nvfp4_jit_prewarm(&p, nullptr) == NVFP4_NO_DEVICE);
      CHECK(last_error().find("CUDA driver unavailable") != std::string::npos);
    }
  }

  TEST_CASE("prewarm and model_shapes from a model directory through the C API") {
    testutil::TempDir model;  // a small Llama: hidden 64, 2 heads of 32, intermediate 32
    std::ofstream(model.path / "config.json") << R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 32,
      "num_attention_heads": 2, "num_key_value_heads": 2, "num_hidden_layers": 1})";
    std::ofstream(model.path / "hf_quant_config.json") << R"({"quantization": {"quant_algo": "NVFP4"}})";
    const std::string dir = model.str();
    int64_t count = -1;
    REQUIRE(nvfp4_jit_model_shapes(dir.c_str(), 1, 1, nullptr, 0, &count) == NVFP4_OK);
    CHECK(count == 3);  // qkv [(2 + 2 x 2) x 32, 64]; o_proj and gate_up both [64, 64]; down [64, 32]
    int64_t shapes[9] = {};
    REQUIRE(nvfp4_jit_model_shapes(dir.c_str(), 1, 1, shapes, 9, &count) == NVFP4_OK);
    CHECK(std::vector<int64_t>(shapes, shapes + 9) == std::vector<int64_t>{(2 + 2 * 2) * 32, 64, 1, 64, 64, 1, 64, 32, 1});
    CHECK(nvfp4_jit_model_shapes(dir.c_str(), 3, 1, shapes, 9, &count) == NVFP4_INVALID_ARGUMENT);
    CHECK(last_error().find("num_attention_heads 2 is not divisible by tp 3") != std::string::npos);
    CHECK(nvfp4_jit_model_shapes(nullptr, 1, 1, shapes, 9, &count) == NVFP4_INVALID_ARGUMENT);
    CHECK(last_error().find("model_dir is null") != std::string::npos);
    CHECK(nvfp4_jit_model_shapes(dir.c_str(), 1, 1, nullptr, 3, &count) == NVFP4_INVALID_ARGUMENT);
    CHECK(nvfp4_jit_model_shapes(dir.c_str(), 0, 1, nullptr, 0, &count) == NVFP4_INVALID_ARGUMENT);
    CHECK(last_error().find("tp = 0") != std::string::npos);

    nvfp4_prewarm_args p;
    nvfp4_prewarm_args_init(&p);
    CHECK(p.model == nullptr);
    CHECK((p.tp == 1 && p.ep == 1));
    p.model = dir.c_str(), p.archs = "sm_90a", p.threads = 2, p.variants = "a-dtype=bf16 in-dtype=bf16";
    nvfp4_prewarm_result r;
    REQUIRE(nvfp4_jit_prewarm(&p, &r) == NVFP4_OK);
    namespace d = nvfp4::jit::detail;
    d::PrewarmVariants v;
    REQUIRE(d::set_prewarm_variants(v, p.variants).empty());
    CHECK(r.kernels == int64_t(d::prewarm_specs(d::derive_model_shapes(dir, 1, 1, v).shapes, {d::Arch::sm_90a}).size()));
    CHECK(r.failed == 0);
    p.tp = 3;
    CHECK(nvfp4_jit_prewarm(&p, nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(starts_with(last_error(), "nvfp4_jit_prewarm: " + dir + "/config.json: num_attention_heads 2 is not divisible by tp 3"));
    p.tp = 0;
    CHECK(nvfp4_jit_prewarm(&p, nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(last_error().find("tp = 0 is not a parallel size") != std::string::npos);
    p.tp = 2, p.model = nullptr;
    const int64_t one[] = {8, 64, 1};
    p.shapes = one, p.num_shapes = 1;
    CHECK(nvfp4_jit_prewarm(&p, nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(last_error().find("tp = 2, ep = 1 without a model") != std::string::npos);
  }

  TEST_CASE("ensure_loaded checks its arguments as the call does and needs no buffers") {
    nvfp4_gemm_args g;
    nvfp4_gemm_args_init(&g);
    g.m = 16, g.n = 64, g.k = 48;  // no pointers: allowed; K = 48: not
    CHECK(nvfp4_jit_ensure_loaded_gemm(&g) == NVFP4_INVALID_ARGUMENT);
    CHECK(starts_with(last_error(), "nvfp4_jit_ensure_loaded_gemm: k = 48"));
    CHECK(nvfp4_jit_ensure_loaded_gemm(nullptr) == NVFP4_INVALID_ARGUMENT);
    g.k = 256;
    nvfp4_quantize_args q;
    nvfp4_quantize_args_init(&q);
    q.rows = 4, q.k = 64;
    if (!nvfp4::jit::detail::driver_available()) {  // valid, pointers null: it gets as far as the device
      CHECK(nvfp4_jit_ensure_loaded_gemm(&g) == NVFP4_NO_DEVICE);
      CHECK(nvfp4_jit_ensure_loaded_quantize(&q) == NVFP4_NO_DEVICE);
      CHECK_THROWS_AS(nvfp4::jit::ensure_loaded(nvfp4::jit::GemmArgs{}), nvfp4::jit::Error);  // n = 0
    }
    q.global_scale.value = 0.0f;
    CHECK(nvfp4_jit_ensure_loaded_quantize(&q) == NVFP4_INVALID_ARGUMENT);
    CHECK(!nvfp4::jit::detail::load_only());  // the mode ends with the call, failed or not
  }
}
