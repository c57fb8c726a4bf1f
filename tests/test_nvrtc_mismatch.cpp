// A cache built by another NVRTC: counted by version (cache stats) and said once, on a
// process's first disk miss, never on a hit.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/kernel_store.hpp"
#include "core/nvrtc_compiler.hpp"
#include "core/nvrtc_library.hpp"
#include "core/nvrtc_mismatch.hpp"
#include "ops/dequantize_op.hpp"
#include "test_util.hpp"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;
namespace fs = std::filesystem;

namespace {

// What this process writes to stderr while it lives.
struct StderrCapture {
  testutil::TempDir dir;
  int saved = -1;
  StderrCapture() {
    std::fflush(stderr);
    saved = ::dup(2);
    const int fd = ::open((dir.str() + "/err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(fd, 2);
    ::close(fd);
  }
  ~StderrCapture() {
    std::fflush(stderr);
    ::dup2(saved, 2);
    ::close(saved);
  }
  std::string text() const {
    std::fflush(stderr);
    std::ifstream in(dir.str() + "/err");
    return std::string((std::istreambuf_iterator<char>(in)), {});
  }
};

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t pos = 0; (pos = text.find(what, pos)) != std::string::npos; pos += what.size()) ++n;
  return n;
}

// Rewrites the "nvrtc" of every sidecar below `dir` to `version`, as if that NVRTC had built them.
size_t set_sidecar_nvrtc(const std::string& dir, const std::string& version) {
  size_t rewritten = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.path().extension() != ".json") continue;
    std::ifstream in(e.path());
    std::string text((std::istreambuf_iterator<char>(in)), {});
    const std::string from = "\"nvrtc\":\"" + sidecar_field(text, "nvrtc") + "\"";
    REQUIRE(text.find(from) != std::string::npos);
    text.replace(text.find(from), from.size(), "\"nvrtc\":\"" + version + "\"");
    std::ofstream(e.path(), std::ios::trunc) << text;
    ++rewritten;
  }
  return rewritten;
}

const KernelSpec kBuilt = dequantize_spec(Arch::sm_90a, 1024, DType::bf16, ScaleLayout::linear);

}  // namespace

TEST_SUITE("nvrtc_mismatch") {
  TEST_CASE("the warning names each root's other versions, this NVRTC and the fix; none when all match") {
    const NvrtcCounts counts = {{"/a", {{"13.0", 5}, {"12.9", 3}, {"", 2}}}, {"/b", {{"13.0", 1}}}};
    const std::string w = other_nvrtc_warning(counts, "13.0", "/lib/libnvrtc.so.13, the system CUDA", "/lib/libnvrtc.so.13");
    CHECK(w.find("this process compiles with NVRTC 13.0 (/lib/libnvrtc.so.13, the system CUDA)") == 0);
    CHECK(w.find("(/a: 3 by NVRTC 12.9)") != std::string::npos);
    CHECK(w.find("/b") == std::string::npos);
    CHECK(w.find("NVFP4_JIT_NVRTC=/lib/libnvrtc.so.13 nvfp4-jit prewarm") != std::string::npos);
    CHECK(other_nvrtc_warning(counts, "12.9", "x", "x").find("/a: 5 by NVRTC 13.0; /b: 1 by NVRTC 13.0") != std::string::npos);
    CHECK(other_nvrtc_warning({{"/a", {{"13.0", 5}, {"", 1}}}}, "13.0", "x", "x").empty());
    CHECK(other_nvrtc_warning({}, "13.0", "x", "x").empty());
  }

  TEST_CASE("a root built by another NVRTC: one warning at the first miss; hits and later misses say nothing") {
    testutil::TempDir dir;
    const std::string root = dir.str();
    {
      KernelStore store(CacheRoots{root, {}});
      REQUIRE(store.get(kBuilt) != nullptr);
    }
    REQUIRE(set_sidecar_nvrtc(root, "12.4") == 1);
    StderrCapture err;
    {
      KernelStore store(CacheRoots{root, {}});  // its key is this NVRTC's: still a hit here
      Origin origin{};
      store.get(kBuilt, &origin);
      CHECK(origin == Origin::disk);
    }
    CHECK(err.text() == "");
    KernelStore store(CacheRoots{root, {}});
    Origin origin{};
    store.get(dequantize_spec(Arch::sm_90a, 1024, DType::fp16, ScaleLayout::linear), &origin);
    CHECK(origin == Origin::compiled);
    store.get(dequantize_spec(Arch::sm_90a, 1024, DType::fp32, ScaleLayout::linear), &origin);
    CHECK(origin == Origin::compiled);
    const std::string text = err.text();
    CHECK(count(text, "nvfp4-jit: warning: this process compiles with NVRTC") == 1);
    CHECK(count(text, "nvfp4-jit: warning:") == 1);
    CHECK(text.find("NVRTC " + nvrtc_version() + " (" + nvrtc_loaded().path) != std::string::npos);
    CHECK(text.find("(" + root + ": 1 by NVRTC 12.4)") != std::string::npos);
    CHECK(text.find("NVFP4_JIT_NVRTC=" + nvrtc_loaded().path + " nvfp4-jit prewarm") != std::string::npos);
  }

  TEST_CASE("cache stats counts each root's entries by the NVRTC that built them, and names this one") {
    testutil::TempDir dir;
    const std::string root = dir.str();
    {
      KernelStore store(CacheRoots{root, {}});
      REQUIRE(store.get(kBuilt) != nullptr);
      REQUIRE(store.get(dequantize_spec(Arch::sm_100a, 1024, DType::bf16, ScaleLayout::linear)) != nullptr);
    }
    REQUIRE(set_sidecar_nvrtc(root + "/v2/sm_100a", "12.9") == 1);  // as if another NVRTC had built it
    const std::string env = "env NVFP4_JIT_CACHE_DIR=" + root + " NVFP4_JIT_CACHE_PATH= ";
    const auto json = testutil::run(env + testutil::cli() + " cache stats --json");
    CAPTURE(json.err);
    REQUIRE(json.code == 0);
    CHECK(json.out.find("\"entries_by_nvrtc\":{\"" + root + "\":{\"12.9\":1,\"" + nvrtc_version() + "\":1}}") != std::string::npos);
    CHECK(json.out.find("\"nvrtc\":\"" + nvrtc_version() + "\",\"nvrtc_path\":\"" + nvrtc_loaded().path + "\"") != std::string::npos);
    const auto text = testutil::run(env + testutil::cli() + " cache stats");
    CHECK(text.out.find("NVRTC      " + nvrtc_version() + ", " + nvrtc_loaded().path) != std::string::npos);
    CHECK(text.out.find("built by NVRTC 12.9") != std::string::npos);
    CHECK(text.out.find(" 1 entries in " + root + " (not used by this NVRTC)") != std::string::npos);
    CHECK(count(text.out, "(not used by this NVRTC)") == 1);
  }
}
