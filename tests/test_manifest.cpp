#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "core/manifest.hpp"
#include "test_util.hpp"
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

  TEST_CASE("lines of one shape and variants are merged into the first; other variants stay apart") {
    std::string text;
    for (int i = 0; i < 2000; ++i) text += i % 2 ? "b 64 64\n" : "a 64 64\n";
    text += "c 64 64 bias=bf16\nd 64 64 4\ne 64 128\n";
    const auto shapes = parse_manifest(text, "m");
    REQUIRE(shapes.size() == 4);
    CHECK(shapes[0].name == "a");
    CHECK(shapes[0].origin == "m:1");
    CHECK(shapes[1].name == "c");
    CHECK(shapes[1].origin == "m:2001");
    CHECK(shapes[2].groups == 4);
    CHECK(shapes[3].k == 128);
    // across manifests and --shape too
    std::vector<WeightShape> all = shapes;
    all.push_back(parse_shape("64,64"));
    all.push_back(parse_shape("64,128,1"));
    CHECK(merge_duplicate_shapes(all).size() == 4);
  }

  TEST_CASE("a manifest with no shapes, a directory or an oversized file is an error naming it") {
    CHECK_THROWS_WITH_AS(parse_manifest("# only a comment\n\n   \n", "empty.txt"),
                         doctest::Contains("empty.txt: no weight shapes"), nvfp4::jit::Error);
    testutil::TempDir dir;
    const std::string is_dir = dir.str() + " is a directory, not a regular file";
    CHECK_THROWS_WITH_AS(load_manifest(dir.str()), doctest::Contains(is_dir.c_str()), nvfp4::jit::Error);
    const std::string big = dir.str() + "/big.txt";
    { std::ofstream(big) << "w 64 64\n"; }
    std::filesystem::resize_file(big, kMaxManifestBytes + 1);
    CHECK_THROWS_WITH_AS(load_manifest(big), doctest::Contains("over the limit of 16777216"), nvfp4::jit::Error);
    // a line quoted in an error: its control bytes escaped, a long one cut
    CHECK_THROWS_WITH_AS(parse_manifest("x\x1b[31m 1\n", "m"), doctest::Contains("m:1: expected `<name> <N> <K> [groups] "
                                                                                   "[key=value...]`, got `x\\x1b[31m 1`"),
                         nvfp4::jit::Error);
    try {
      parse_manifest(std::string(100000, 'z') + "\n", "long.txt");
      FAIL("expected an error");
    } catch (const nvfp4::jit::Error& e) {
      CHECK(std::string(e.what()).size() < 400);
      CHECK(std::string(e.what()).find("long.txt:1:") != std::string::npos);
    }
  }
}
