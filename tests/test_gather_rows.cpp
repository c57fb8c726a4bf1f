// The grouped W4A16 GEMM's row gather (ops/gemm/gather_rows_op.hpp): its key, name and SASS.
// (What it copies is checked on the GPU: tests/gpu/test_gpu_grouped_gemm.cpp's gathered calls.)
#include <doctest/doctest.h>

#include <string>

#include "core/op_registry.hpp"
#include "ops/gemm/gather_rows_op.hpp"
#include "sass_util.hpp"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;

TEST_SUITE("gather_rows") {
  TEST_CASE("a kernel per K and 16-bit type (the NaN of a row outside A), named for both") {
    CHECK(op_kernels(Op::gather_rows).kernel_name(gather_rows_spec(Arch::sm_90a, 7168, DType::fp16)) ==
          "nvfp4_gather_rows_k7168_fp16");
    CHECK(gather_rows_spec(Arch::sm_90a, 7168, DType::fp16) != gather_rows_spec(Arch::sm_90a, 7168, DType::bf16));
    CHECK(gather_rows_spec(Arch::sm_90a, 7168, DType::bf16) != gather_rows_spec(Arch::sm_90a, 2048, DType::bf16));
    CHECK(to_string(Op::gather_rows) == "gather_rows");
    CHECK(parse_op("gather_rows") == Op::gather_rows);
  }

  TEST_CASE("SASS: 16-byte loads and stores, no local memory (K of one batch, and of several)") {
    // 2048: one piece a thread; 7168: 3.5; 65536: four batches of eight
    std::vector<KernelSpec> specs;
    for (int64_t k : {2048, 7168, 65536}) specs.push_back(gather_rows_spec(Arch::sm_90a, k, DType::bf16));
    test::check_kernel_sass(specs, "LDG.E.128", 1);
    test::check_kernel_sass(specs, "STG.E.128", 1);
  }
}
