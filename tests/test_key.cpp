// Cache keys: golden values and independence from the machine, user and cache root.
#include <doctest/doctest.h>

#include "core/embedded.hpp"
#include "core/kernel_store.hpp"
#include "core/nvrtc_compiler.hpp"
#include "ops/dequantize_op.hpp"
#include "test_util.hpp"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;

TEST_SUITE("key") {
  TEST_CASE("golden keys: the key scheme has not changed by accident") {
    // If this fails after an intended change of the key scheme, bump kCacheAbiVersion and
    // update the values: every cached kernel of every user is invalidated by the change.
    const std::vector<std::string> options = {"--gpu-architecture=sm_90a", "--std=c++17"};
    CHECK(compute_key({"templates", "source", "13.0", options, Arch::sm_90a}).hex() == "597bd27ee768bc5dd84cc8c06e552db5");
    CHECK(compute_key({"templates", "source", "13.0", options, Arch::sm_100a}).hex() == "13b1f76cfeb699f0fbc390a22b6d9b8f");
  }

  TEST_CASE("every input changes the key, and field boundaries matter") {
    const std::vector<std::string> o1 = {"-a"}, o2 = {"-b"};
    const CacheKey base = compute_key({"t", "s", "13.0", o1, Arch::sm_90a});
    CHECK(base != compute_key({"t2", "s", "13.0", o1, Arch::sm_90a}));
    CHECK(base != compute_key({"t", "s2", "13.0", o1, Arch::sm_90a}));
    CHECK(base != compute_key({"t", "s", "13.1", o1, Arch::sm_90a}));
    CHECK(base != compute_key({"t", "s", "13.0", o2, Arch::sm_90a}));
    CHECK(base != compute_key({"t", "s", "13.0", o1, Arch::sm_120a}));
    CHECK(compute_key({"ts", "", "13.0", o1, Arch::sm_90a}) != compute_key({"t", "s", "13.0", o1, Arch::sm_90a}));
  }

  TEST_CASE("keys do not depend on the cache root, the working directory or the user") {
    const KernelSpec spec = dequantize_spec(Arch::sm_90a, 4096, DType::bf16, ScaleLayout::linear);
    const std::string k1 = key_for(spec, generate(spec)).hex();
    testutil::TempDir a, b;
    {
      testutil::ScopedEnv env("NVFP4_JIT_CACHE_DIR", a.str());
      testutil::ScopedEnv user("USER", "someone-else");
      CHECK(key_for(spec, generate(spec)).hex() == k1);
    }
    // Two processes with different cache roots and working directories store the same key.
    for (const auto* dir : {&a, &b}) {
      const auto r = testutil::run("cd / && NVFP4_JIT_CACHE_DIR=" + dir->str() + " " + testutil::cli() +
                                   " prewarm --shape 1,4096 --arch sm_90a --quiet");
      REQUIRE(r.code == 0);
    }
    const auto la = testutil::run("NVFP4_JIT_CACHE_DIR=" + a.str() + " " + testutil::cli() + " cache ls --json");
    const auto lb = testutil::run("NVFP4_JIT_CACHE_DIR=" + b.str() + " " + testutil::cli() + " cache ls --json");
    CHECK(la.out.find(k1) != std::string::npos);
    CHECK(lb.out.find(k1) != std::string::npos);
  }

  TEST_CASE("the templates hash covers every embedded template") {
    CHECK(templates_hash().size() == 32);
    CHECK(embedded_templates().size() >= 6);
    bool found = false;
    for (const auto& f : embedded_templates()) found |= std::string(f.name) == "common/nvfp4_format.cuh";
    CHECK(found);
  }
}
