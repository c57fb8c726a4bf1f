// The disk cache: round trip, corruption recovery, read-only roots, planted symlinks.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "core/kernel_store.hpp"
#include "core/prewarm.hpp"
#include "ops/dequantize_op.hpp"
#include "test_util.hpp"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;
using testutil::cli;
using testutil::run;
namespace fs = std::filesystem;

namespace {

const KernelSpec kSpec = dequantize_spec(Arch::sm_90a, 1024, DType::bf16, ScaleLayout::linear);

fs::path entry_path(const std::string& root, const KernelSpec& spec, const char* ext) {
  const std::string key = key_for(spec, generate(spec)).hex();
  return fs::path(root) / "v2" / std::string(to_string(spec.arch)) / key.substr(0, 2) / (key + ext);
}

Origin fetch(const std::string& root, const KernelSpec& spec = kSpec) {
  KernelStore store(CacheRoots{root, {}});  // a fresh process's view: nothing in memory
  Origin origin{};
  store.get(spec, &origin);
  return origin;
}

std::string with_cache(const std::string& root) { return "NVFP4_JIT_CACHE_DIR=" + root + " " + cli(); }

long kernel_count(const std::string& shape) { return long(prewarm_specs({parse_shape(shape)}, {Arch::sm_90a}).size()); }

}  // namespace

TEST_SUITE("disk_cache") {
  TEST_CASE("store then load: the second process hits the disk; files are private") {
    testutil::TempDir dir;
    const std::string root = dir.str() + "/cache";
    CHECK(fetch(root) == Origin::compiled);
    CHECK(fetch(root) == Origin::disk);
    struct stat st{};
    REQUIRE(::stat(root.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0700);
    REQUIRE(::stat(entry_path(root, kSpec, ".cubin").c_str(), &st) == 0);
    CHECK((st.st_mode & 0077) == 0);
    std::ifstream sidecar(entry_path(root, kSpec, ".json"));
    std::string json((std::istreambuf_iterator<char>(sidecar)), {});
    CHECK(json.find("\"checksum\":") != std::string::npos);
    CHECK(json.find("\"spec\":{\"op\":\"dequantize\"") != std::string::npos);
  }

  TEST_CASE("truncated, garbage and wrong-arch entries are misses: recompiled and replaced") {
    testutil::TempDir dir;
    const std::string root = dir.str();
    const KernelSpec other = dequantize_spec(Arch::sm_100a, 1024, DType::bf16, ScaleLayout::linear);
    REQUIRE(fetch(root) == Origin::compiled);
    REQUIRE(fetch(root, other) == Origin::compiled);
    const fs::path cubin = entry_path(root, kSpec, ".cubin"), sidecar = entry_path(root, kSpec, ".json");

    SUBCASE("truncated") { fs::resize_file(cubin, fs::file_size(cubin) / 2); }
    SUBCASE("garbage") { std::ofstream(cubin, std::ios::binary) << std::string(fs::file_size(cubin), 'x'); }
    SUBCASE("wrong arch") {
      fs::copy_file(entry_path(root, other, ".cubin"), cubin, fs::copy_options::overwrite_existing);
      fs::copy_file(entry_path(root, other, ".json"), sidecar, fs::copy_options::overwrite_existing);
    }
    SUBCASE("sidecar missing") { fs::remove(sidecar); }
    CHECK(fetch(root) == Origin::compiled);
    CHECK(fetch(root) == Origin::disk);  // replaced by a good entry
  }

  TEST_CASE("a read-only root in NVFP4_JIT_CACHE_PATH serves hits and is never written") {
    testutil::TempDir shared, mine;
    REQUIRE(fetch(shared.str()) == Origin::compiled);
    KernelStore store(CacheRoots{mine.str(), {shared.str()}});
    Origin origin{};
    store.get(kSpec, &origin);
    CHECK(origin == Origin::disk);
    CHECK(!fs::exists(fs::path(mine.str()) / "v2"));
  }

  TEST_CASE("a cache root that is a symlink owned by someone else is not followed") {
    if (::geteuid() != 0) return;  // needs root to plant a link owned by another user
    testutil::TempDir dir;
    const std::string target = dir.str() + "/elsewhere", link = dir.str() + "/cache";
    fs::create_directory(target);
    fs::create_directory_symlink(target, link);
    REQUIRE(::lchown(link.c_str(), 65534, 65534) == 0);
    KernelStore store(CacheRoots{link, {}});
    CHECK_FALSE(store.disk().writable());
    Origin origin{};
    store.get(kSpec, &origin);  // still works, from memory
    CHECK(origin == Origin::compiled);
    CHECK(fs::is_empty(target));
  }

  TEST_CASE("a root listed twice is read once; thousands of spellings of it hold no file descriptors; at most 64 are used") {
    testutil::TempDir dir, links;
    const std::string root = dir.str();
    REQUIRE(run(with_cache(root) + " prewarm --shape 8,128 --arch sm_90a --quiet").code == 0);
    const long n = kernel_count("8,128");
    SUBCASE("in NVFP4_JIT_CACHE_PATH and as the cache directory") {
      const auto stats = run("NVFP4_JIT_CACHE_PATH=" + root + ":" + root + "/.:" + root + " " + with_cache(root) +
                             " cache stats --json");
      CAPTURE(stats.err);
      CHECK(testutil::json_int(stats.out, "entries") == n);
    }
    SUBCASE("2000 links to one root, under a limit of 256 open files") {
      std::string path;
      for (int i = 0; i < 2000; ++i) {
        const std::string link = links.str() + "/" + std::to_string(i);
        fs::create_directory_symlink(root, link);
        path += (i ? ":" : "") + link;
      }
      const std::string env = "NVFP4_JIT_CACHE_PATH=" + path + " " + with_cache(links.str() + "/mine");
      const auto r = run("ulimit -n 256 && " + env + " prewarm --shape 8,128 --arch sm_90a --json");
      CAPTURE(r.err.substr(0, 2000));
      CHECK(r.code == 0);
      CHECK(testutil::json_int(r.out, "cached") == n);
      CHECK(testutil::json_int(run(env + " cache stats --json").out, "entries") == n);
    }
    SUBCASE("more than 64 distinct roots") {
      std::string path;
      for (int i = 0; i < 70; ++i) {
        const std::string other = links.str() + "/" + std::to_string(i);
        fs::create_directory(other);
        path += other + ":";
      }
      const auto r = run("NVFP4_JIT_CACHE_PATH=" + path + root + " " + with_cache(links.str() + "/mine") +
                         " prewarm --shape 8,128 --arch sm_90a --json");
      CAPTURE(r.err);
      CHECK(testutil::json_int(r.out, "cached") == 0);  // the 71st is not used
      CHECK(r.err.find("NVFP4_JIT_CACHE_PATH names more than 64") != std::string::npos);
    }
  }

  TEST_CASE("NVFP4_JIT_LOCK_WAIT_S is parsed strictly: what is not 0 to 86400 seconds is a warning naming the value used") {
    struct Case {
      const char* text;
      long long ms;
      bool warns;
    };
    for (const Case& c : {Case{"0", 0, false}, Case{"2.5", 2500, false}, Case{"86400", 86400000, false},
                          Case{"1e10", 86400000, true}, Case{"inf", 86400000, true}, Case{"1e300", 86400000, true},
                          Case{"1e999", 86400000, true}, Case{"abc", 60000, true}, Case{"-5", 60000, true},
                          Case{"nan", 60000, true}, Case{"5s", 60000, true}, Case{" 5", 60000, true}, Case{"", 60000, true}}) {
      CAPTURE(c.text);
      std::string warning;
      CHECK(parse_lock_wait(c.text, &warning).count() == c.ms);
      CHECK(warning.empty() == !c.warns);
      if (c.warns) {
        CHECK(warning.find(fmt::format("NVFP4_JIT_LOCK_WAIT_S={}", c.text)) != std::string::npos);
        CHECK(warning.find(fmt::format("waiting {} s", c.ms / 1000)) != std::string::npos);
      }
    }
  }

  TEST_CASE("a bad NVFP4_JIT_LOCK_WAIT_S is said, not silently a 0 s wait") {
    testutil::TempDir dir;
    for (const char* value : {"1e10", "inf", "abc", "-5"}) {
      CAPTURE(value);
      const auto r = run(std::string("NVFP4_JIT_LOCK_WAIT_S=") + value + " " + with_cache(dir.str()) + " cache stats");
      CHECK(r.err.find(std::string("NVFP4_JIT_LOCK_WAIT_S=") + value) != std::string::npos);
    }
  }

  TEST_CASE("an entry another root provides is not said to be recompiled when a bad copy is met first") {
    testutil::TempDir mine, shared;
    REQUIRE(run(with_cache(shared.str()) + " prewarm --shape 8,128 --arch sm_90a --quiet").code == 0);
    REQUIRE(run(with_cache(mine.str()) + " prewarm --shape 8,128 --arch sm_90a --quiet").code == 0);
    const long n = kernel_count("8,128");
    // our copies are torn (a store killed between its two files, long ago)
    for (const auto& e : fs::recursive_directory_iterator(mine.path))
      if (e.path().extension() == ".json") fs::remove(e.path());
    for (const auto& e : fs::recursive_directory_iterator(mine.path))
      if (e.path().extension() == ".cubin")
        fs::last_write_time(e.path(), fs::file_time_type::clock::now() - std::chrono::hours(1));
    const auto r = run("NVFP4_JIT_CACHE_PATH=" + shared.str() + " " + with_cache(mine.str()) +
                       " prewarm --shape 8,128 --arch sm_90a --json");
    CAPTURE(r.err);
    CHECK(testutil::json_int(r.out, "cached") == n);
    CHECK(testutil::json_int(r.out, "compiled") == 0);
    CHECK(r.err.find("recompiled") == std::string::npos);
  }
}
