// The disk cache: round trip, corruption recovery, read-only roots, planted symlinks.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/kernel_store.hpp"
#include "ops/dequantize_op.hpp"
#include "test_util.hpp"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;
namespace fs = std::filesystem;

namespace {

const KernelSpec kSpec = dequantize_spec(Arch::sm_90a, 1024, DType::bf16, ScaleLayout::linear);

fs::path entry_path(const std::string& root, const KernelSpec& spec, const char* ext) {
  const std::string key = key_for(spec, generate(spec)).hex();
  return fs::path(root) / "v1" / std::string(to_string(spec.arch)) / key.substr(0, 2) / (key + ext);
}

Origin fetch(const std::string& root, const KernelSpec& spec = kSpec) {
  KernelStore store(CacheRoots{root, {}});  // a fresh process's view: nothing in memory
  Origin origin{};
  store.get(spec, &origin);
  return origin;
}

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
    CHECK(!fs::exists(fs::path(mine.str()) / "v1"));
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
}
