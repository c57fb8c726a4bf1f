// The disk cache against a hostile co-tenant and hostile files: untrusted roots are never
// read, nothing below a root is followed, a loaded CUBIN is the ELF it claims to be, no cache
// file can make a process wait forever, and what --json prints always parses.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>

#include <fmt/format.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "core/kernel_store.hpp"
#include "core/prewarm.hpp"
#include "core/tuning_table.hpp"
#include "ops/dequantize_op.hpp"
#include "test_util.hpp"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;
using testutil::cli;
using testutil::run;
namespace fs = std::filesystem;

namespace {

const KernelSpec kSpec = dequantize_spec(Arch::sm_90a, 1024, DType::bf16, ScaleLayout::linear);
const KernelSpec kOther = dequantize_spec(Arch::sm_100a, 1024, DType::bf16, ScaleLayout::linear);

std::string with_cache(const std::string& root) { return "NVFP4_JIT_CACHE_DIR=" + root + " " + cli(); }
// The same, killed after 120 s: what would hang forever fails instead (with room for
// compiling on a machine that several builds share).
std::string bounded(const std::string& root) { return "NVFP4_JIT_CACHE_DIR=" + root + " timeout 120 " + cli(); }

fs::path entry_path(const std::string& root, const KernelSpec& spec, const char* ext) {
  const std::string key = key_for(spec, generate(spec)).hex();
  return fs::path(root) / "v2" / std::string(to_string(spec.arch)) / key.substr(0, 2) / (key + ext);
}

Origin fetch(const std::string& root, const KernelSpec& spec = kSpec) {
  KernelStore store(CacheRoots{root, {}});
  Origin origin{};
  store.get(spec, &origin);
  return origin;
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void spit(const fs::path& p, const std::string& data) { std::ofstream(p, std::ios::binary | std::ios::trunc) << data; }

// Replaces the CUBIN and brings its sidecar's size and checksum along, as a forger would.
void forge(const std::string& root, const KernelSpec& spec, const std::string& cubin) {
  spit(entry_path(root, spec, ".cubin"), cubin);
  std::string side = slurp(entry_path(root, spec, ".json"));
  side = std::regex_replace(side, std::regex(R"("size":[0-9]+)"), "\"size\":" + std::to_string(cubin.size()));
  side = std::regex_replace(side, std::regex(R"("checksum":"[0-9a-f]+")"),
                            fmt::format("\"checksum\":\"{:016x}\"", XXH3_64bits(cubin.data(), cubin.size())));
  spit(entry_path(root, spec, ".json"), side);
}

using testutil::cubins;

bool python_available() { return run("python3 -c 1").code == 0; }

long kernel_count(const std::string& shape) {
  return long(prewarm_specs({parse_shape(shape)}, {Arch::sm_90a}).size());
}

}  // namespace

TEST_SUITE("cache_security") {
  TEST_CASE("a root owned by another user, or writable by others, is neither read nor written") {
    if (::geteuid() != 0) {
      MESSAGE("skipped: planting a root owned by another uid needs root");
      return;
    }
    testutil::TempDir shared, mine;
    const std::string ro = shared.str() + "/ro";
    REQUIRE(run(with_cache(ro) + " prewarm --shape 8,128 --arch sm_90a --quiet").code == 0);
    const long n = kernel_count("8,128");
    std::string why;
    SUBCASE("owned by another uid") {
      REQUIRE(run("chown -R 65534:65534 " + ro).code == 0);
      why = "owned by uid 65534";
    }
    SUBCASE("world-writable without the sticky bit") {
      ::chmod(ro.c_str(), 0777);
      why = "writable by other users";
    }
    SUBCASE("a directory on its path is world-writable") {
      ::chmod(shared.str().c_str(), 0777);
      why = "writable by other users";
    }
    SUBCASE("reached through a symlink owned by another uid") {
      const std::string link = mine.str() + "/link";
      fs::create_directory_symlink(ro, link);
      REQUIRE(::lchown(link.c_str(), 65534, 65534) == 0);
      why = "symlink owned by uid 65534";
      const auto r = run("NVFP4_JIT_CACHE_PATH=" + link + " " + with_cache(mine.str() + "/c") +
                         " prewarm --shape 8,128 --arch sm_90a --json");
      CAPTURE(r.err);
      CHECK(testutil::json_int(r.out, "cached") == 0);
      CHECK(r.err.find(why) != std::string::npos);
      return;
    }
    CAPTURE(why);
    // as a read-only root: not one hit, and one warning naming the path and the reason
    const auto as_path = run("NVFP4_JIT_CACHE_PATH=" + ro + " " + with_cache(mine.str() + "/c") +
                             " prewarm --shape 8,128 --arch sm_90a --json");
    CAPTURE(as_path.err);
    CHECK(testutil::json_int(as_path.out, "cached") == 0);
    CHECK(testutil::json_int(as_path.out, "compiled") == n);
    CHECK(as_path.err.find(ro) != std::string::npos);
    CHECK(as_path.err.find(why) != std::string::npos);
    // as the primary root: not read either (and nothing is stored there)
    const auto as_primary = run(with_cache(ro) + " prewarm --shape 8,128 --arch sm_90a --json");
    CAPTURE(as_primary.err);
    CHECK(testutil::json_int(as_primary.out, "cached") == 0);
    CHECK(as_primary.code == 1);
  }

  TEST_CASE("a symlink below the root is not followed when entries are created") {
    testutil::TempDir dir;
    const std::string root = dir.str() + "/cache", elsewhere = dir.str() + "/elsewhere";
    fs::create_directories(fs::path(root) / "v2");
    fs::create_directory(elsewhere);
    ::chmod(root.c_str(), 0700);
    fs::create_directory_symlink(elsewhere, fs::path(root) / "v2" / "sm_90a");
    const auto r = run(with_cache(root) + " prewarm --shape 8,128 --arch sm_90a --json");
    CAPTURE(r.err);
    CHECK(fs::is_empty(elsewhere));
    CHECK(r.code == 1);  // compiled, not stored: said, not hidden
    CHECK(r.err.find("sm_90a") != std::string::npos);
  }

  TEST_CASE("a CUBIN whose ELF is not what its key says is a bad entry, even with a matching sidecar") {
    testutil::TempDir dir;
    const std::string root = dir.str();
    REQUIRE(fetch(root) == Origin::compiled);
    REQUIRE(fetch(root, kOther) == Origin::compiled);
    std::string cubin = slurp(entry_path(root, kSpec, ".cubin"));
    std::string expect;
    SUBCASE("another arch's CUBIN") {
      cubin = slurp(entry_path(root, kOther, ".cubin"));
      expect = "sm_100";
    }
    SUBCASE("not a CUDA ELF") {
      cubin[18] = 0x3e, cubin[19] = 0;  // EM_X86_64
      expect = "not CUDA";
    }
    SUBCASE("without the kernel its spec names") {
      const std::string name = generate(kSpec).name;
      for (size_t pos = cubin.find(name); pos != std::string::npos; pos = cubin.find(name, pos + 1))
        cubin[pos + name.size() - 1] ^= 1;
      expect = "does not contain kernel";
    }
    forge(root, kSpec, cubin);
    const auto verify = run(with_cache(root) + " cache verify");
    CAPTURE(verify.out);
    CHECK(verify.code == 1);
    CHECK(verify.out.find("1 bad") != std::string::npos);
    CHECK(verify.out.find(expect) != std::string::npos);
    CHECK(fetch(root) == Origin::compiled);  // never loaded: recompiled and replaced
    CHECK(run(with_cache(root) + " cache verify").code == 0);
  }

  TEST_CASE("a FIFO at a cache path is a bad entry, never waited on") {
    testutil::TempDir dir;
    const std::string root = dir.str();
    REQUIRE(fetch(root) == Origin::compiled);
    const char* ext = nullptr;
    SUBCASE("at the CUBIN") { ext = ".cubin"; }
    SUBCASE("at the sidecar") { ext = ".json"; }
    CAPTURE(ext);
    const fs::path p = entry_path(root, kSpec, ext);
    fs::remove(p);
    REQUIRE(::mkfifo(p.c_str(), 0600) == 0);
    const auto verify = run(bounded(root) + " cache verify");
    CAPTURE(verify.out);
    CHECK(verify.code == 1);
    CHECK(verify.out.find("FIFO") != std::string::npos);
    const auto prewarm = run(bounded(root) + " prewarm --shape 8,1024 --arch sm_90a --json");
    CAPTURE(prewarm.err);
    CHECK(prewarm.code == 0);
    CHECK(testutil::json_int(prewarm.out, "failed") == 0);
  }

  TEST_CASE("a key whose lock holder is stopped is compiled after a bounded wait, and that is said") {
    testutil::TempDir dir;
    const std::string root = dir.str();
    const std::vector<KernelSpec> specs = prewarm_specs({parse_shape("8,128")}, {Arch::sm_90a});
    const fs::path lock = entry_path(root, specs[0], ".lock");
    fs::create_directories(lock.parent_path());
    for (fs::path p = lock.parent_path(); p != fs::path(root); p = p.parent_path()) ::chmod(p.c_str(), 0700);
    const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(::flock(fd, LOCK_EX) == 0);  // held "by a stopped process"
    const auto r = run("NVFP4_JIT_LOCK_WAIT_S=1 " + bounded(root) + " prewarm --shape 8,128 --arch sm_90a --json");
    ::close(fd);
    CAPTURE(r.err);
    CHECK(r.code == 0);
    CHECK(testutil::json_int(r.out, "compiled") == long(specs.size()));
    CHECK(testutil::json_int(r.out, "deferred") == 1);  // put off while the rest compiled, then waited for
    CHECK(r.err.find("waited") != std::string::npos);
  }

  TEST_CASE("--json output parses whatever sidecars and file names hold; sidecars are bounded before they are read") {
    if (!python_available()) {
      MESSAGE("skipped: python3 (the independent JSON parser) is not available");
      return;
    }
    testutil::TempDir dir;
    const std::string root = dir.str();
    REQUIRE(fetch(root) == Origin::compiled);
    REQUIRE(fetch(root, kOther) == Origin::compiled);
    // a sidecar with quotes, control bytes, bytes that are not UTF-8 and a spec that is not JSON
    std::string side = slurp(entry_path(root, kSpec, ".json"));
    side = std::regex_replace(side, std::regex(R"("created":"[^"]*")"), "\"created\":\"a\\\\\x01\xff\xfe\"");
    side = std::regex_replace(side, std::regex(R"("spec":.*)"), "\"spec\":{\"op\":\"x\\q\x02\"}\n");
    spit(entry_path(root, kSpec, ".json"), side);
    // an entry under a directory name no arch has
    const fs::path odd = fs::path(root) / "v2" / "sm_9\"0\xff" / "ab";
    fs::create_directories(odd);
    spit(odd / "ab000000000000000000000000000000.cubin", "x");
    // a sidecar far over any real one's size (sparse: nothing is written)
    fs::resize_file(entry_path(root, kOther, ".json"), size_t(100) << 20);
    const std::string parse = " | python3 -c 'import json,sys; json.load(sys.stdin)'";
    for (const char* cmd : {" cache ls --json", " cache verify --json", " cache stats --json"}) {
      CAPTURE(cmd);
      CHECK(run(with_cache(root) + cmd + parse).code == 0);
    }
    const auto verify = run(with_cache(root) + " cache verify");
    CAPTURE(verify.out);
    CHECK(verify.out.find("over the limit") != std::string::npos);
    // a tuning table over its bound is not read, with a note
    const std::string table = root + "/v2/tuning/" + TuningTable::file_name(Arch::sm_90a, "Big GPU", 132);
    fs::create_directories(fs::path(table).parent_path());
    spit(table, "");
    fs::resize_file(table, size_t(64) << 20);
    const TuningTable big(table, Arch::sm_90a, "Big GPU", 132);
    REQUIRE(big.notes().size() == 1);
    CHECK(big.notes()[0].find("over the limit") != std::string::npos);
  }

  TEST_CASE("below a root, a directory or file another user owns or can write is refused, sticky bit or not") {
    testutil::TempDir dir, mine;
    const std::string root = dir.str() + "/shared";
    REQUIRE(run(with_cache(root) + " prewarm --shape 8,128 --arch sm_90a --quiet").code == 0);
    const long n = kernel_count("8,128");
    const std::vector<fs::path> all = cubins(root);
    REQUIRE(long(all.size()) == n);
    const fs::path target = all[0];
    const fs::path kk = target.parent_path();
    long in_kk = 0;  // the kernels below the compromised directory
    for (const fs::path& c : all) in_kk += c.parent_path() == kk;
    long refused = 0;
    std::string why;
    // another user put the code there and made its sidecar agree
    forge(root, kSpec, slurp(target));
    SUBCASE("the root itself is sticky and world-writable (a shared /tmp/x or /dev/shm/x)") {
      REQUIRE(::chmod(root.c_str(), 01777) == 0);
      why = "writable by other users", refused = n;
    }
    SUBCASE("an entry directory is sticky and world-writable") {
      REQUIRE(::chmod(kk.c_str(), 01777) == 0);
      why = "writable by other users", refused = in_kk;
    }
    SUBCASE("a CUBIN is writable by others") {
      REQUIRE(::chmod(target.c_str(), 0666) == 0);
      why = "writable by other users", refused = 1;
    }
    SUBCASE("v2 belongs to another user") {
      if (::geteuid() != 0) {
        MESSAGE("skipped: giving v2 to another uid needs root");
        return;
      }
      REQUIRE(run("chown -R 12345:12345 " + root + "/v2").code == 0);
      why = "owned by uid 12345", refused = n;
    }
    SUBCASE("a CUBIN belongs to another user") {
      if (::geteuid() != 0) {
        MESSAGE("skipped: giving a file to another uid needs root");
        return;
      }
      REQUIRE(::chown(target.c_str(), 12345, 12345) == 0);
      why = "owned by uid 12345", refused = 1;
    }
    CAPTURE(why);
    CAPTURE(refused);
    // through NVFP4_JIT_CACHE_PATH: only what is not below the refused part is read
    const auto as_path = run("NVFP4_JIT_CACHE_PATH=" + root + " " + with_cache(mine.str() + "/c") +
                             " prewarm --shape 8,128 --arch sm_90a --json");
    CAPTURE(as_path.err);
    CHECK(testutil::json_int(as_path.out, "cached") == n - refused);
    CHECK(as_path.err.find(why) != std::string::npos);
    // and verify says so and fails, for either kind of root
    for (const std::string& env : {"NVFP4_JIT_CACHE_DIR=" + root + " ",
                                   "NVFP4_JIT_CACHE_DIR=" + mine.str() + "/c NVFP4_JIT_CACHE_PATH=" + root + " "}) {
      CAPTURE(env);
      const auto verify = run(env + cli() + " cache verify");
      CAPTURE(verify.out);
      CAPTURE(verify.err);
      CHECK(verify.code == 1);
      CHECK((verify.out + verify.err).find(why) != std::string::npos);
    }
    // through NVFP4_JIT_CACHE_DIR: the same (last: it replaces what it may write)
    const auto as_dir = run(with_cache(root) + " prewarm --shape 8,128 --arch sm_90a --json");
    CAPTURE(as_dir.err);
    CHECK(testutil::json_int(as_dir.out, "cached") == n - refused);
  }

  TEST_CASE("cache verify on a root it refuses says it refused it and exits 1") {
    testutil::TempDir dir;
    const std::string root = dir.str() + "/open";
    REQUIRE(run(with_cache(root) + " prewarm --shape 8,128 --arch sm_90a --quiet").code == 0);
    REQUIRE(::chmod(root.c_str(), 0777) == 0);
    const auto verify = run(with_cache(root) + " cache verify");
    CAPTURE(verify.out);
    CAPTURE(verify.err);
    CHECK(verify.code == 1);
    CHECK(verify.err.find("refused") != std::string::npos);
    CHECK(verify.err.find(root) != std::string::npos);
  }

  TEST_CASE("commands that only read create nothing on the cache's path; nothing is made through another user's symlink") {
    testutil::TempDir dir;
    SUBCASE("stats, ls, verify and info with a root that does not exist") {
      const std::string root = dir.str() + "/new/a/b";
      for (const char* cmd : {" cache stats", " cache stats --json", " cache ls", " cache verify", " info", " info --json"}) {
        CAPTURE(cmd);
        const auto r = run(with_cache(root) + cmd);
        CAPTURE(r.err);
        CHECK(r.code == 0);
        CHECK_FALSE(fs::exists(dir.path / "new"));
      }
      CHECK(run(with_cache(root) + " cache stats").out.find("not made yet") != std::string::npos);
    }
    SUBCASE("a path through a symlink owned by another user") {
      if (::geteuid() != 0) {
        MESSAGE("skipped: planting a symlink owned by another uid needs root");
        return;
      }
      const std::string target = dir.str() + "/rootdir", link = dir.str() + "/l";
      fs::create_directory(target);
      ::chmod(dir.str().c_str(), 0755);
      fs::create_directory_symlink(target, link);
      REQUIRE(::lchown(link.c_str(), 12345, 12345) == 0);
      for (const char* cmd : {" cache stats", " cache ls", " cache verify", " info", " prewarm --shape 8,128 --arch sm_90a"}) {
        CAPTURE(cmd);
        const auto r = run(with_cache(link + "/a/b") + cmd);
        CAPTURE(r.err);
        CHECK(fs::is_empty(target));
      }
      const auto prewarm = run(with_cache(link + "/a/b") + " prewarm --shape 8,128 --arch sm_90a --json");
      CHECK(prewarm.err.find("symlink owned by uid 12345") != std::string::npos);
    }
  }
}
