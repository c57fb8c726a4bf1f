// The C API: status codes and the thread-local last-error message.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <thread>

#include "nvfp4/jit.h"

TEST_SUITE("c_api") {
  TEST_CASE("null args and bad arguments return a status and a message") {
    CHECK(nvfp4_jit_dequantize(nullptr, nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(std::string(nvfp4_jit_last_error()).find("args is null") != std::string::npos);

    nvfp4_dequantize_args a;
    std::memset(&a, 0, sizeof a);
    a.k = 24;
    CHECK(nvfp4_jit_dequantize(&a, nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(std::string(nvfp4_jit_last_error()).find("k = 24") != std::string::npos);

    a.k = 32;
    a.out_dtype = NVFP4_DTYPE_NVFP4;
    CHECK(nvfp4_jit_dequantize(&a, nullptr) == NVFP4_UNSUPPORTED);

    CHECK(nvfp4_jit_rmsnorm_quantize(nullptr, nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(std::string(nvfp4_jit_last_error()).find("nvfp4_jit_rmsnorm_quantize: args is null") != std::string::npos);
    nvfp4_swiglu_quantize_args s;
    std::memset(&s, 0, sizeof s);
    s.k = 64;
    s.interleave = 3;
    s.out.global_scale.value = 1.0f;
    CHECK(nvfp4_jit_swiglu_quantize(&s, nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(std::string(nvfp4_jit_last_error()).find("interleave = 3") != std::string::npos);
    nvfp4_moe_stage_args m;
    std::memset(&m, 0, sizeof m);
    m.k = 64;
    m.out.scale_mode = NVFP4_GSCALE_COMPUTE_PER_TENSOR;
    CHECK(nvfp4_jit_moe_stage(&m, nullptr) == NVFP4_UNSUPPORTED);

    CHECK(nvfp4_jit_prepack(nullptr, nullptr) == NVFP4_INVALID_ARGUMENT);
    nvfp4_prepack_args p;
    std::memset(&p, 0, sizeof p);
    p.n = 64, p.k = 100;
    CHECK(nvfp4_jit_prepack(&p, nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(std::string(nvfp4_jit_last_error()).find("nvfp4::jit::prepack: k = 100") == 0);
    CHECK(nvfp4_jit_prepacked_bytes(128, 256) == 2 * 4 * 2304 + 128);
    CHECK(nvfp4_jit_prepacked_bytes(128, 100) == -1);
    nvfp4_gemm_args g;
    std::memset(&g, 0, sizeof g);
    g.n = 64, g.k = 256, g.b_prepacked = 1, g.b.scale_layout = nvfp4_scale_layout(9);  // unused when prepacked
    CHECK(nvfp4_jit_gemm(&g, nullptr) == NVFP4_OK);                                  // m = 0: validated, no work
    g.b_prepacked = 0;
    CHECK(nvfp4_jit_gemm(&g, nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(nvfp4_jit_grouped_gemm(nullptr, nullptr) == NVFP4_INVALID_ARGUMENT);
    CHECK(std::string(nvfp4_jit_last_error()).find("nvfp4_jit_grouped_gemm: args is null") != std::string::npos);
    nvfp4_grouped_gemm_args e;
    std::memset(&e, 0, sizeof e);
    e.gemm = g;
    e.gemm.b_prepacked = 1;
    e.layout = NVFP4_GROUPED_MASKED;
    CHECK(nvfp4_jit_grouped_gemm(&e, nullptr) == NVFP4_INVALID_ARGUMENT);  // groups = 0
    CHECK(std::string(nvfp4_jit_last_error()).find("groups = 0 must be positive") != std::string::npos);
    e.groups = 8;
    CHECK(nvfp4_jit_grouped_gemm(&e, nullptr) == NVFP4_OK);  // m = 0: validated, no work
    e.gemm.a_dtype = NVFP4_DTYPE_NVFP4, e.gemm.m = 16, e.gemm.a = nullptr;
    CHECK(nvfp4_jit_grouped_gemm_workspace_bytes(&e) == 8 * 16 * 256 * 2);
    e.groups = -1;
    CHECK(nvfp4_jit_grouped_gemm_workspace_bytes(&e) == -1);
  }

  TEST_CASE("the last error is per thread, and a success clears it") {
    nvfp4_jit_dequantize(nullptr, nullptr);
    std::string other = "unset";
    std::thread([&] { other = nvfp4_jit_last_error(); }).join();
    CHECK(other.empty());
    nvfp4_dequantize_args a;
    std::memset(&a, 0, sizeof a);
    a.k = 32;  // zero rows: a valid no-op
    CHECK(nvfp4_jit_dequantize(&a, nullptr) == NVFP4_OK);
    CHECK(std::string(nvfp4_jit_last_error()).empty());
    CHECK(std::string(nvfp4_jit_version()).size() > 0);
  }
}
