// Finding NVRTC: the search order (a pure function over candidates), and the real search as
// the command reports it (NVFP4_JIT_NVRTC, a wheel beside the binary, the system CUDA).
#include <doctest/doctest.h>

#include <filesystem>
#include <set>

#include "core/nvrtc_compiler.hpp"
#include "core/nvrtc_library.hpp"
#include "nvfp4/jit.hpp"
#include "test_util.hpp"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;
namespace fs = std::filesystem;

namespace {

const std::string kSystemNvrtc = "/usr/local/cuda/lib64/libnvrtc.so.13";

// An opener that loads exactly the names in `loadable` and fails `broken` with a message.
NvrtcOpener opener(std::set<std::string> loadable, std::set<std::string> broken = {},
                   std::vector<std::string>* tried = nullptr) {
  return [=](const NvrtcCandidate& c) -> NvrtcOpened {
    if (tried) tried->push_back(c.name);
    if (loadable.count(c.name)) return {reinterpret_cast<void*>(0x1), {}};
    if (broken.count(c.name)) return {nullptr, "wrong ELF class"};
    return {};
  };
}

// The string value of "field": in a one-line JSON object.
std::string json_str(const std::string& json, const std::string& field) {
  const size_t pos = json.find("\"" + field + "\":\"");
  if (pos == std::string::npos) return "<absent>";
  const size_t start = pos + field.size() + 4;
  return json.substr(start, json.find('"', start) - start);
}

// `nvfp4-jit info --json` under `env` (prefixed to the command line), run as `cli`.
testutil::Run info(const std::string& env, const std::string& cli = testutil::cli()) {
  return testutil::run("env -u NVFP4_JIT_NVRTC -u LD_LIBRARY_PATH -u CUDA_HOME " + env + " " + cli + " info --json");
}

}  // namespace

TEST_SUITE("nvrtc_library") {
  TEST_CASE("the candidates come in the documented order") {
    const auto c = nvrtc_candidates({"/opt/my/libnvrtc.so", "/a/b/c/d/e", "/opt/cuda"});
    std::vector<std::string> names;
    for (const auto& x : c) names.push_back(std::string(to_string(x.source)) + " " + x.name);
    const std::vector<std::string> expected = {
        "env /opt/my/libnvrtc.so",
        "process libnvrtc.so.13",
        "process libnvrtc.so.12",
        "wheel /a/b/c/d/e/nvidia/cu13/lib/libnvrtc.so.13",
        "wheel /a/b/c/d/e/nvidia/cuda_nvrtc/lib/libnvrtc.so.12",
        "wheel /a/b/c/d/nvidia/cu13/lib/libnvrtc.so.13",
        "wheel /a/b/c/d/nvidia/cuda_nvrtc/lib/libnvrtc.so.12",
        "wheel /a/b/c/nvidia/cu13/lib/libnvrtc.so.13",
        "wheel /a/b/c/nvidia/cuda_nvrtc/lib/libnvrtc.so.12",
        "wheel /a/b/nvidia/cu13/lib/libnvrtc.so.13",
        "wheel /a/b/nvidia/cuda_nvrtc/lib/libnvrtc.so.12",
        "system /opt/cuda/lib64/libnvrtc.so.13",
        "system /opt/cuda/lib64/libnvrtc.so.12",
        "system /usr/local/cuda/lib64/libnvrtc.so.13",
        "system /usr/local/cuda/lib64/libnvrtc.so.12",
        "system libnvrtc.so.13",
        "system libnvrtc.so.12",
    };
    REQUIRE(names.size() == expected.size());
    for (size_t i = 0; i < names.size(); ++i) {
      CAPTURE(i);
      CHECK(names[i] == expected[i]);
    }
  }

  TEST_CASE("without the variable, CUDA_HOME or a binary directory those steps are left out; the walk stops at /") {
    const auto c = nvrtc_candidates({"", "/x", ""});
    CHECK(c.front().source == NvrtcSource::process);
    size_t wheel = 0;
    for (const auto& x : c) wheel += x.source == NvrtcSource::wheel;
    CHECK(wheel == 4);  // /x and /
    CHECK(c[2].name == "/x/nvidia/cu13/lib/libnvrtc.so.13");
    CHECK(c[4].name == "/nvidia/cu13/lib/libnvrtc.so.13");
    CHECK(c[6].name == "/usr/local/cuda/lib64/libnvrtc.so.13");
    CHECK(nvrtc_candidates({"", "", ""}).size() == 6);
  }

  TEST_CASE("the first candidate that loads wins; absent and broken ones are passed over") {
    const auto c = nvrtc_candidates({"", "/site/nvfp4_jit", ""});
    std::vector<std::string> tried;
    const NvrtcChoice choice =
        choose_nvrtc(c, opener({"/site/nvidia/cu13/lib/libnvrtc.so.13", kSystemNvrtc}, {"/site/nvfp4_jit/nvidia/cu13/lib/libnvrtc.so.13"}, &tried));
    REQUIRE(choice.handle != nullptr);
    CHECK(choice.candidate.source == NvrtcSource::wheel);
    CHECK(choice.candidate.name == "/site/nvidia/cu13/lib/libnvrtc.so.13");
    CHECK(tried.back() == choice.candidate.name);  // nothing after it was opened
    // A process that already holds an NVRTC uses it before any wheel.
    const NvrtcChoice loaded = choose_nvrtc(c, opener({"libnvrtc.so.12", "/site/nvidia/cu13/lib/libnvrtc.so.13"}));
    CHECK(loaded.candidate.source == NvrtcSource::process);
    CHECK(loaded.candidate.name == "libnvrtc.so.12");
  }

  TEST_CASE("a variable that does not load is an error naming it, not a fallback") {
    const auto c = nvrtc_candidates({"/nowhere/libnvrtc.so.13", "", ""});
    std::vector<std::string> tried;
    const NvrtcChoice missing = choose_nvrtc(c, opener({kSystemNvrtc}, {}, &tried));
    CHECK(missing.handle == nullptr);
    CHECK(tried.size() == 1);
    CHECK(missing.error.find("NVFP4_JIT_NVRTC=/nowhere/libnvrtc.so.13 cannot be loaded: no such file") == 0);
    const NvrtcChoice broken = choose_nvrtc(c, opener({kSystemNvrtc}, {"/nowhere/libnvrtc.so.13"}));
    CHECK(broken.error.find("cannot be loaded: wrong ELF class") != std::string::npos);
  }

  TEST_CASE("no NVRTC anywhere: the error lists every place looked at and the variable that fixes it") {
    const auto c = nvrtc_candidates({"", "/site/pkg", "/opt/cuda"});
    const NvrtcChoice none = choose_nvrtc(c, opener({}, {"/opt/cuda/lib64/libnvrtc.so.13"}));
    CHECK(none.handle == nullptr);
    for (const auto& x : c) {
      CAPTURE(x.name);
      CHECK(none.error.find(x.name) != std::string::npos);
    }
    CHECK(none.error.find("/opt/cuda/lib64/libnvrtc.so.13 (wrong ELF class)") != std::string::npos);
    CHECK(none.error.find("Set NVFP4_JIT_NVRTC to a libnvrtc.so.13") != std::string::npos);
  }

  TEST_CASE("this process's NVRTC is loaded and reported with the version its keys use") {
    const NvrtcInfo info = nvrtc_info();
    REQUIRE_MESSAGE(info.error.empty(), info.error);
    CHECK(fs::exists(info.path));
    CHECK(info.version == nvrtc_version());
    CHECK(std::set<std::string>{"env", "process", "wheel", "system"}.count(info.source) == 1);
  }

  TEST_CASE("the command: NVFP4_JIT_NVRTC is used and reported as such; with none, the system CUDA's") {
    REQUIRE(fs::exists(kSystemNvrtc));
    const auto by_env = info("NVFP4_JIT_NVRTC=" + kSystemNvrtc);
    CAPTURE(by_env.err);
    REQUIRE(by_env.code == 0);
    CHECK(json_str(by_env.out, "nvrtc_source") == "env");
    CHECK(json_str(by_env.out, "nvrtc_path") == kSystemNvrtc);
    CHECK(by_env.out.find("\"nvrtc_targets\":[\"sm_90a\"") != std::string::npos);
    const auto plain = info("");
    CHECK(json_str(plain.out, "nvrtc_source") == "system");
    CHECK(json_str(plain.out, "nvrtc_path") == kSystemNvrtc);
    CHECK(json_str(plain.out, "nvrtc") == json_str(by_env.out, "nvrtc"));
  }

  TEST_CASE("the command: a missing NVFP4_JIT_NVRTC fails every compile naming it; info and the cache work on") {
    testutil::TempDir dir;
    const std::string env = "NVFP4_JIT_NVRTC=" + dir.str() + "/missing/libnvrtc.so.13 NVFP4_JIT_CACHE_DIR=" + dir.str();
    const auto shown = info(env);
    CHECK(shown.code == 0);
    CHECK(json_str(shown.out, "nvrtc") == "");
    CHECK(json_str(shown.out, "nvrtc_error").find("NVFP4_JIT_NVRTC=" + dir.str() + "/missing/libnvrtc.so.13 cannot be loaded") == 0);
    CHECK(shown.out.find("\"nvrtc_targets\":[]") != std::string::npos);
    const auto text = testutil::run("env " + env + " " + testutil::cli() + " info");
    CHECK(text.code == 0);
    CHECK(text.out.find("NVRTC       none: NVFP4_JIT_NVRTC=") != std::string::npos);
    for (const char* verb : {"cache stats", "cache verify", "cache ls"}) {
      const auto r = testutil::run("env " + env + " " + testutil::cli() + " " + verb);
      CAPTURE(verb);
      CAPTURE(r.err);
      CHECK(r.code == 0);
    }
    const auto prewarm = testutil::run("env " + env + " " + testutil::cli() + " prewarm --shape 256,256 --arch sm_90a");
    CHECK(prewarm.code != 0);
    CHECK(prewarm.err.find("NVFP4_JIT_NVRTC=" + dir.str() + "/missing/libnvrtc.so.13 cannot be loaded") != std::string::npos);
  }

  TEST_CASE("the command: an nvidia-cuda-nvrtc wheel's layout beside the binary is found (step 3) and compiles") {
    // site-packages/nvidia/cu13/lib/libnvrtc.so.13 (the CUDA 13 wheel's path; here a link to the
    // system's, without its builtins) and a copy of the command two levels below site-packages.
    testutil::TempDir dir;
    const fs::path lib = dir.path / "site-packages/nvidia/cu13/lib";
    const fs::path bin = dir.path / "site-packages/nvfp4_jit/bin";
    fs::create_directories(lib);
    fs::create_directories(bin);
    fs::create_symlink(kSystemNvrtc, lib / "libnvrtc.so.13");
    fs::copy_file(testutil::cli(), bin / "nvfp4-jit");
    fs::permissions(bin / "nvfp4-jit", fs::perms::owner_exec, fs::perm_options::add);
    const std::string cache = "NVFP4_JIT_CACHE_DIR=" + dir.str() + "/cache";
    const auto r = info(cache, (bin / "nvfp4-jit").string());
    CAPTURE(r.err);
    REQUIRE(r.code == 0);
    CHECK(json_str(r.out, "nvrtc_source") == "wheel");
    CHECK(json_str(r.out, "nvrtc_path") == (lib / "libnvrtc.so.13").string());
    // It compiles with no LD_LIBRARY_PATH and, where the loader can be asked to, without its
    // cache of ldconfig's directories: NVRTC's builtins are found beside the real library.
    const std::string loader = fs::exists("/lib64/ld-linux-x86-64.so.2") ? "/lib64/ld-linux-x86-64.so.2 --inhibit-cache " : "";
    const auto compiled = testutil::run("env -u LD_LIBRARY_PATH -u CUDA_HOME " + cache + " timeout 120 " + loader +
                                        (bin / "nvfp4-jit").string() +
                                        " prewarm --shape 256,256 --arch sm_90a --a-dtype bf16 -j 1 2>&1 | head -1");
    CHECK(compiled.out.rfind("compiled ", 0) == 0);
    CHECK(compiled.out.find("nvfp4_gemm_") != std::string::npos);
  }
}
