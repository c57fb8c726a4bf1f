#include <doctest/doctest.h>

#include "core/manifest.hpp"
#include "nvfp4/jit.hpp"

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
}
