#include <doctest/doctest.h>

#include "core/manifest.hpp"
#include "nvfp4/jit.hpp"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;

TEST_SUITE("manifest") {
  TEST_CASE("built-in manifests parse and hold the models' real shapes") {
    const auto names = builtin_manifest_names();
    CHECK(names == std::vector<std::string>{"deepseek-v3", "gpt-oss-120b", "llama-3.1-8b", "llama-3.3-70b", "qwen3-30b-a3b"});
    const auto llama = load_manifest("llama-3.1-8b");
    REQUIRE(llama.size() == 4);
    CHECK(llama[3].name == "down_proj");
    CHECK(llama[3].n == 4096);
    CHECK(llama[3].k == 14336);
    // what writes each weight's activations: Llama's down_proj reads SwiGLU's rows
    CHECK(llama[3].variants.a_from == std::vector<AFrom>{AFrom::swiglu, AFrom::quantize});
    CHECK(llama[1].variants.a_from == std::vector<AFrom>{AFrom::quantize});
    const auto ds = load_manifest("deepseek-v3");
    CHECK(ds.back().groups == 256);
    for (const auto& n : names) CHECK(!load_manifest(n).empty());
  }

  TEST_CASE("errors name the origin and line") {
    try {
      parse_manifest("# ok\nq 10 32\nbad line here\n", "model.txt");
      FAIL("expected an error");
    } catch (const nvfp4::jit::Error& e) {
      CHECK(std::string(e.what()).find("model.txt:3") != std::string::npos);
    }
    CHECK_THROWS_WITH_AS(parse_manifest("x 10 40\n", "m"), doctest::Contains("m:1: K = 40"), nvfp4::jit::Error);
    CHECK_THROWS_AS(parse_shape("1,2,3,4"), nvfp4::jit::Error);
    CHECK(parse_shape("8,64,4").groups == 4);
  }

  TEST_CASE("a manifest line's variant fields replace the base variants for that line only") {
    PrewarmVariants base;
    REQUIRE(set_prewarm_variants(base, "d-dtype=fp32 in-dtype=fp16").empty());
    const auto shapes =
        parse_manifest("qkv 6144 4096 bias=bf16,none a-dtype=fp16 norm-weight=fp32\nexperts 1536 2048 64 grouped=masked\n", "m", base);
    REQUIRE(shapes.size() == 2);
    CHECK(shapes[0].variants.biases == std::vector<uint8_t>{uint8_t(DType::bf16), kNoDType});
    CHECK(shapes[0].variants.a_dtypes == std::vector<DType>{DType::fp16});
    CHECK(shapes[0].variants.d_dtypes == std::vector<DType>{DType::fp32});  // the base's
    CHECK(shapes[0].variants.norm_weights == std::vector<NormWeight>{NormWeight::fp32});
    CHECK(shapes[1].variants.norm_weights.empty());  // each op's usual one
    CHECK(shapes[1].groups == 64);
    CHECK(shapes[1].variants.grouped == std::vector<GroupedLayout>{GroupedLayout::masked});
    CHECK(shapes[1].variants.a_dtypes == PrewarmVariants{}.a_dtypes);
    CHECK(shapes[1].variants.in_dtypes == std::vector<DType>{DType::fp16});
    CHECK(parse_shape("8,64", base).variants.d_dtypes == std::vector<DType>{DType::fp32});
    CHECK_THROWS_WITH_AS(parse_manifest("q 10 32 bias=fp16\n", "m"), doctest::Contains("m:1: bias: `fp16` is not one of none, bf16, fp32"),
                         nvfp4::jit::Error);
    CHECK_THROWS_WITH_AS(parse_manifest("q 10 32 a-from=gelu\n", "m"),
                         doctest::Contains("m:1: a-from: `gelu` is not one of quantize, rmsnorm, swiglu, mhc, stage"),
                         nvfp4::jit::Error);
    CHECK_THROWS_WITH_AS(parse_manifest("q 10 32 b-layout=\n", "m"), doctest::Contains("m:1: b-layout: `` is not one of"),
                         nvfp4::jit::Error);
    CHECK_THROWS_WITH_AS(parse_manifest("q 10 32 a-dtype=bf16 7\n", "m"), doctest::Contains("m:1: `7` is not `key=value"),
                         nvfp4::jit::Error);
    PrewarmVariants v;
    CHECK(set_prewarm_variants(v, "a-dtype=nvfp4 a-scales=linear,swizzled").empty());
    CHECK(v.a_scales.size() == 2);
    CHECK(set_prewarm_variants(v, "a-dtype=fp32").find("a-dtype: `fp32` is not one of bf16, fp16, nvfp4") == 0);
    CHECK(set_prewarm_variants(v, "grouped").find("`grouped` is not `key=value") == 0);
  }
}
