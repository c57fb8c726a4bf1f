// Single-flight compiles: threads in a process, processes through the disk cache's locks.
#include <doctest/doctest.h>

#include <filesystem>
#include <thread>

#include "core/kernel_store.hpp"
#include "core/prewarm.hpp"
#include "ops/dequantize_op.hpp"
#include "test_util.hpp"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;

TEST_SUITE("kernel_store") {
  TEST_CASE("8 threads asking for the same missing kernels compile each once") {
    testutil::TempDir dir;
    KernelStore store(CacheRoots{dir.str(), {}});
    const std::vector<KernelSpec> specs = dequantize_prewarm_specs(Arch::sm_90a, 2048);
    std::vector<std::thread> threads;
    std::atomic<int> errors{0};
    for (int t = 0; t < 8; ++t)
      threads.emplace_back([&] {
        for (const KernelSpec& s : specs) {
          try {
            if (store.get(s)->cubin.empty()) ++errors;
          } catch (...) {
            ++errors;
          }
        }
      });
    for (auto& t : threads) t.join();
    CHECK(errors == 0);
    CHECK(store.stats().compiled == specs.size());
  }

  TEST_CASE("a failed compile is reported to every waiter and retried by a later call") {
    testutil::TempDir dir;
    KernelStore store(CacheRoots{dir.str(), {}});
    DequantizeSpec odd = dequantize_spec(Arch::sm_90a, 1024, DType::bf16, ScaleLayout::linear).as<DequantizeSpec>();
    odd.k = 1000;  // the template's static_assert rejects it
    const KernelSpec bad = KernelSpec::of(Arch::sm_90a, odd);
    CHECK_THROWS_AS(store.get(bad), Error);
    CHECK_THROWS_AS(store.get(bad), Error);
    CHECK(store.stats().failed == 2);
  }

  TEST_CASE("8 processes racing on the same missing keys compile each key exactly once") {
    testutil::TempDir dir;
    const std::string cmd = "NVFP4_JIT_CACHE_DIR=" + dir.str() + " " + testutil::cli() +
                            " prewarm --shape 64,3072 --shape 64,5120 --arch sm_90a,sm_120a -j 2 --json";
    const size_t kernels = prewarm_specs({parse_shape("64,3072"), parse_shape("64,5120")}, {Arch::sm_90a, Arch::sm_120a}).size();
    std::vector<testutil::Run> runs(8);
    std::vector<std::thread> procs;
    for (auto& r : runs) procs.emplace_back([&r, &cmd] { r = testutil::run(cmd); });
    for (auto& p : procs) p.join();
    long compiled = 0;
    for (const auto& r : runs) {
      CAPTURE(r.err);
      REQUIRE(r.code == 0);
      CHECK(testutil::json_int(r.out, "kernels") == long(kernels));
      CHECK(testutil::json_int(r.out, "failed") == 0);
      compiled += testutil::json_int(r.out, "compiled");
    }
    CHECK(compiled == long(kernels));
    const auto verify = testutil::run("NVFP4_JIT_CACHE_DIR=" + dir.str() + " " + testutil::cli() + " cache verify");
    CHECK(verify.code == 0);
    CHECK(verify.out.find(std::to_string(kernels) + " entries, 0 bad") != std::string::npos);
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir.path))
      CHECK(e.path().string().find(".tmp.") == std::string::npos);  // no torn temp files left
  }
}
