// Looking after the cache while others use it: verify / prune / clear never take an entry that
// is complete or being written, leftovers of dead writers are swept, ages are exact, failures
// to store are counted and exit 1, and import says what it left out.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include <fmt/format.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "core/kernel_store.hpp"
#include "core/prewarm.hpp"
#include "core/tuning_table.hpp"
#include "ops/dequantize_op.hpp"
#include "gemm_test_util.hpp"
#include "test_util.hpp"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;
using testutil::cli;
using testutil::run;
namespace fs = std::filesystem;

namespace {

std::string with_cache(const std::string& root) { return "NVFP4_JIT_CACHE_DIR=" + root + " " + cli(); }

long kernel_count(const std::string& shape) { return long(prewarm_specs({parse_shape(shape)}, {Arch::sm_90a}).size()); }

using testutil::cubins;

// The paths of the 8,128 shape's sm_90a entries, prewarmed into `root` and then removed: each
// key's directories stay, for a test to put something in one key's way.
std::vector<fs::path> prewarmed_then_emptied(const std::string& root) {
  REQUIRE(run(with_cache(root) + " prewarm --shape 8,128 --arch sm_90a --quiet").code == 0);
  const std::vector<fs::path> all = cubins(root);
  for (const fs::path& c : all) fs::remove(fs::path(c).replace_extension(".json")), fs::remove(c);
  return all;
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void spit(const fs::path& p, const std::string& data) { std::ofstream(p, std::ios::binary | std::ios::trunc) << data; }

// Holds an flock on `path` (created) for as long as it lives: another process's lock.
struct HeldLock {
  int fd;
  explicit HeldLock(const fs::path& path) : fd(::open(path.c_str(), O_RDWR | O_CREAT, 0600)) {
    REQUIRE(fd >= 0);
    REQUIRE(::flock(fd, LOCK_EX) == 0);
  }
  ~HeldLock() { ::close(fd); }
};

void age(const fs::path& p, std::chrono::hours by) {
  fs::last_write_time(p, fs::file_time_type::clock::now() - by);
}

// A pid that no running process has: a child that has exited and been reaped.
pid_t dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

// One ustar member (type '0' file, '2' symlink, '5' directory, '6' FIFO).
std::string tar_member(const std::string& name, const std::string& data, char type = '0') {
  char h[512] = {};
  std::memcpy(h, name.data(), std::min<size_t>(name.size(), 99));
  std::snprintf(h + 100, 8, "%07o", 0644);
  std::snprintf(h + 108, 8, "%07o", 0);
  std::snprintf(h + 116, 8, "%07o", 0);
  std::snprintf(h + 124, 12, "%011llo", (unsigned long long)data.size());
  std::snprintf(h + 136, 12, "%011o", 0);
  h[156] = type;
  if (type == '2') std::memcpy(h + 157, "/etc/passwd", 11);
  std::memcpy(h + 257, "ustar", 6);
  std::memcpy(h + 263, "00", 2);
  std::memset(h + 148, ' ', 8);
  unsigned sum = 0;
  for (unsigned char c : h) sum += c;
  std::snprintf(h + 148, 8, "%06o", sum);
  std::string out(h, 512);
  out += data;
  out.append((512 - data.size() % 512) % 512, '\0');
  return out;
}

}  // namespace

TEST_SUITE("cache_maintenance") {
  TEST_CASE("verify --remove-bad, prune and clear leave an entry that is being written") {
    testutil::TempDir dir;
    const std::string root = dir.str();
    REQUIRE(run(with_cache(root) + " prewarm --shape 8,128 --arch sm_90a --quiet").code == 0);
    const fs::path cubin = cubins(root)[0];
    const fs::path sidecar = fs::path(cubin).replace_extension(".json");
    SUBCASE("its writer holds the key's lock (the new CUBIN is in, the old sidecar not yet replaced)") {
      const HeldLock held(fs::path(cubin).replace_extension(".lock"));
      spit(cubin, slurp(cubin) + "new");
      const auto v = run(with_cache(root) + " cache verify --remove-bad");
      CAPTURE(v.out);
      CHECK(v.out.find("1 being written") != std::string::npos);
      CHECK(fs::exists(cubin));
      ::sleep(1);
      CHECK(run(with_cache(root) + " cache prune --older-than 0s").code == 0);
      CHECK(fs::exists(cubin));
      CHECK(run(with_cache(root) + " cache clear").code == 0);
      CHECK(fs::exists(cubin));
      CHECK(cubins(root).size() == 1);
    }
    SUBCASE("a CUBIN written a moment ago whose sidecar is not there yet") {
      fs::remove(sidecar);
      const auto v = run(with_cache(root) + " cache verify --remove-bad");
      CAPTURE(v.out);
      CHECK(fs::exists(cubin));
      CHECK(run(with_cache(root) + " cache clear").code == 0);
      CHECK(fs::exists(cubin));
      // once it is older than the grace period it is a torn entry, and goes
      age(cubin, std::chrono::hours(1));
      CHECK(run(with_cache(root) + " cache verify --remove-bad").code == 0);
      CHECK_FALSE(fs::exists(cubin));
    }
  }

  TEST_CASE("an earlier layout's directory is reported by stats and removed by prune and clear; its entries are never read") {
    testutil::TempDir dir;
    const std::string root = dir.str();
    REQUIRE(run(with_cache(root) + " prewarm --shape 8,128 --arch sm_90a --quiet").code == 0);
    const long current = long(cubins(root).size());
    // a v1 root as the previous version left it: two entries and a tuning table
    const fs::path old = fs::path(root) / "v1";
    fs::create_directories(old / "sm_90a" / "ab");
    fs::create_directories(old / "tuning");
    for (const char* name : {"ab01", "ab02"}) {
      spit(old / "sm_90a" / "ab" / (std::string(name) + std::string(28, '0') + ".cubin"), std::string(1000, 'x'));
      spit(old / "sm_90a" / "ab" / (std::string(name) + std::string(28, '0') + ".json"), "{}");
    }
    spit(old / "tuning" / "sm_90a-GPU-132.json", std::string(96, ' '));
    {
      DiskCache cache(CacheRoots{root, {}});
      const std::vector<OldCacheLayout> found = cache.old_layouts();
      REQUIRE(found.size() == 1);
      CHECK(found[0].layout == "v1");
      CHECK(found[0].entries == 2);
      CHECK(found[0].bytes == 2 * 1000 + 2 * 2 + 96);
      CHECK(long(cache.list(false).size()) == current);  // not read as entries
    }
    const auto stats = run(with_cache(root) + " cache stats --json");
    CHECK(stats.out.find(R"("old_layouts":[{"root":")") != std::string::npos);
    CHECK(stats.out.find(R"("layout":"v1","entries":2,"bytes":2100})") != std::string::npos);
    CHECK(run(with_cache(root) + " cache stats").out.find("/v1: 2 entries") != std::string::npos);
    const auto pruned = run(with_cache(root) + " cache prune --older-than 30d --json");
    CHECK(pruned.code == 0);
    CHECK(testutil::json_int(pruned.out, "removed_old_layout_entries") == 2);
    CHECK_FALSE(fs::exists(old));
    CHECK(long(cubins(root).size()) == current);  // this layout's entries stay
    CHECK(run(with_cache(root) + " cache stats --json").out.find(R"("old_layouts":[])") != std::string::npos);
    // clear removes one too
    fs::create_directories(old / "sm_90a" / "cd");
    spit(old / "sm_90a" / "cd" / (std::string(32, 'c') + ".cubin"), "x");
    const auto cleared = run(with_cache(root) + " cache clear --json");
    CHECK(testutil::json_int(cleared.out, "removed_old_layout_entries") == 1);
    CHECK_FALSE(fs::exists(old));
  }

  TEST_CASE("an entry listed as bad but completed since is not removed") {
    testutil::TempDir dir;
    const std::string root = dir.str();
    REQUIRE(run(with_cache(root) + " prewarm --shape 8,128 --arch sm_90a --quiet").code == 0);
    const fs::path cubin = cubins(root)[0];
    const std::string good = slurp(cubin);
    spit(cubin, good.substr(0, 100));
    DiskCache cache(CacheRoots{root, {}});
    std::vector<CacheEntryInfo> bad;
    for (const CacheEntryInfo& e : cache.list(true))
      if (!e.problem.empty()) bad.push_back(e);
    REQUIRE(bad.size() == 1);
    spit(cubin, good);  // a writer stored the key again meanwhile
    CHECK_FALSE(cache.remove(bad[0]));
    CHECK(fs::exists(cubin));
    CHECK(run(with_cache(root) + " cache verify").code == 0);
  }

  TEST_CASE("a store whose directory or temp file vanishes retries; the cache stays writable") {
    testutil::TempDir dir;
    const std::string root = dir.str();
    DiskCache cache(CacheRoots{root, {}});
    REQUIRE(cache.writable());
    std::atomic<bool> done{false};
    std::thread cleaner([&] {
      while (!done) {
        std::error_code ec;
        fs::remove_all(fs::path(root) / "v2", ec);
        std::this_thread::sleep_for(std::chrono::microseconds(500));
      }
    });
    const std::string cubin(20000, 'c');
    for (uint64_t i = 0; i < 400 && cache.writable(); ++i) cache.store(CacheKey{i, i}, Arch::sm_90a, cubin, "{}");
    done = true;
    cleaner.join();
    CHECK(cache.writable());
  }

  TEST_CASE("prune --older-than removes exactly the entries older than the age; any age works, out of range is a usage error") {
    testutil::TempDir dir;
    const std::string root = dir.str();
    REQUIRE(run(with_cache(root) + " prewarm --shape 8,128 --arch sm_90a --quiet").code == 0);
    const long n = kernel_count("8,128");
    const std::vector<fs::path> all = cubins(root);
    for (size_t i = 0; i < all.size(); i += 2) age(all[i], std::chrono::hours(72));
    const long old = long((all.size() + 1) / 2);
    auto removed = [&](const std::string& age) {
      return testutil::json_int(run(with_cache(root) + " cache prune --older-than " + age + " --json").out, "removed_entries");
    };
    for (const char* huge : {"200000d", "106752d", "9223372036854775807s", "153722867280912h"}) {
      CAPTURE(huge);
      CHECK(removed(huge) == 0);
    }
    CHECK(removed("4d") == 0);
    CHECK(removed("2d") == old);
    CHECK(removed("71h") == 0);
    CHECK(long(cubins(root).size()) == n - old);
    for (const char* bad : {"9999999999999999d", "9223372036854775808s", "99999999999999999999", "-1d", "+5", "5 d", "1.5d", "", "d"}) {
      CAPTURE(bad);
      CHECK(run(with_cache(root) + " cache prune --older-than '" + bad + "'").code == 2);
    }
    CHECK(long(cubins(root).size()) == n - old);
  }

  TEST_CASE("prewarm exits 1 and says how many kernels it compiled but could not store, and why") {
    testutil::TempDir dir;
    const long n = kernel_count("8,128");
    std::string root, prefix, why;
    bool mounted = false;
    SUBCASE("a read-only root") {
      root = dir.str() + "/ro";
      fs::create_directory(root);
      if (::geteuid() == 0) {
        // root ignores permissions: run as an unprivileged user that owns the directory
        REQUIRE(::chown(root.c_str(), 65534, 65534) == 0);
        ::chmod(dir.str().c_str(), 0755);
        prefix = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
      }
      ::chmod(root.c_str(), 0500);
      why = "read-only";
    }
    SUBCASE("a root that is a file") {
      root = dir.str() + "/file";
      spit(root, "x");
      why = "not a directory";
    }
    SUBCASE("a path too long") {
      root = dir.str() + "/" + std::string(300, 'a');
      why = "too long";
    }
    SUBCASE("a full disk") {
      root = dir.str() + "/small";
      fs::create_directory(root);
      if (::mount("tmpfs", root.c_str(), "tmpfs", 0, "size=64k,mode=0700") != 0) {
        MESSAGE("skipped the full-disk case: mounting a tmpfs is not permitted here (", std::strerror(errno), ")");
        return;
      }
      mounted = true;
      why = "No space left on device";
    }
    CAPTURE(why);
    const std::string env = "NVFP4_JIT_CACHE_DIR=" + root + " " + prefix;
    const auto r = run(env + cli() + " prewarm --shape 8,128 --arch sm_90a --json");
    if (mounted) ::umount2(root.c_str(), MNT_DETACH);
    CAPTURE(r.err);
    CHECK(r.code == 1);
    CHECK(testutil::json_int(r.out, "compiled") == n);
    CHECK(testutil::json_int(r.out, "failed") == 0);
    CHECK(testutil::json_int(r.out, "not_stored") > 0);
    CHECK(r.err.find("compiled but not stored") != std::string::npos);
    CHECK(r.err.find(why) != std::string::npos);
    if (why == "read-only") {
      const auto stats = run(env + cli() + " cache stats");
      CHECK(stats.out.find("read-only") != std::string::npos);
      CHECK(run(env + cli() + " cache stats --json").out.find("\"writable\":false") != std::string::npos);
      for (const char* cmd : {" cache clear", " cache prune --older-than 1d", " cache verify --remove-bad"}) {
        CAPTURE(cmd);
        const auto c = run(env + cli() + cmd);
        CHECK(c.code == 1);
        CHECK(c.err.find("read-only") != std::string::npos);
      }
    }
  }

  TEST_CASE("temp and lock files of dead writers are reported by verify and swept by prune, clear and verify --remove-bad") {
    testutil::TempDir dir;
    const std::string root = dir.str();
    REQUIRE(run(with_cache(root) + " prewarm --shape 8,128 --arch sm_90a --quiet").code == 0);
    for (const auto& e : fs::recursive_directory_iterator(root))
      CHECK(e.path().extension() != ".lock");  // a writer that finished leaves no lock file
    const std::vector<fs::path> all = cubins(root);
    REQUIRE(all.size() >= 3);
    auto plant = [&] {
      const fs::path dead_temp = all[0].string() + ".tmp." + std::to_string(dead_pid()) + ".abc";
      const fs::path stale_lock = fs::path(all[1]).replace_extension(".lock");
      spit(dead_temp, "partial");
      spit(stale_lock, "");
      return std::pair{dead_temp, stale_lock};
    };
    const fs::path live_temp = all[2].string() + ".tmp." + std::to_string(::getpid()) + ".def";
    spit(live_temp, "being written");
    const HeldLock held(fs::path(all[2]).replace_extension(".lock"));
    const fs::path held_lock = fs::path(all[2]).replace_extension(".lock");

    auto [dead_temp, stale_lock] = plant();
    const auto v = run(with_cache(root) + " cache verify");
    CAPTURE(v.out);
    CHECK(v.code == 0);
    CHECK(v.out.find("2 leftover files") != std::string::npos);
    CHECK(v.out.find(dead_temp.string()) != std::string::npos);
    CHECK(v.out.find(stale_lock.string()) != std::string::npos);
    CHECK(v.out.find(live_temp.string()) == std::string::npos);

    SUBCASE("prune") { CHECK(run(with_cache(root) + " cache prune --older-than 100d").code == 0); }
    SUBCASE("verify --remove-bad") { CHECK(run(with_cache(root) + " cache verify --remove-bad").code == 0); }
    SUBCASE("clear") { CHECK(run(with_cache(root) + " cache clear").code == 0); }
    CHECK_FALSE(fs::exists(dead_temp));
    CHECK_FALSE(fs::exists(stale_lock));
    CHECK(fs::exists(live_temp));  // in use: never removed
    CHECK(fs::exists(held_lock));
  }

  TEST_CASE("import counts every member it leaves out and exits 1; tuning entries are checked before they are written") {
    testutil::TempDir a, b;
    REQUIRE(run(with_cache(a.str()) + " prewarm --shape 8,128 --arch sm_90a --quiet").code == 0);
    const fs::path cubin = cubins(a.str())[0];
    const std::string key = cubin.stem().string();
    const std::string body = slurp(cubin), side = slurp(fs::path(cubin).replace_extension(".json"));
    const std::string good = "v2/sm_90a/" + key.substr(0, 2) + "/" + key;
    std::string tar = tar_member(good + ".cubin", body) + tar_member(good + ".json", side);
    std::string expect;
    size_t skipped = 0;
    SUBCASE("a symlink") { tar += tar_member("v2/sm_90a/ab/link.cubin", "", '2'), expect = "a symlink", skipped = 1; }
    SUBCASE("a directory") { tar += tar_member("v2/sm_90a/ab/", "", '5'), expect = "a directory", skipped = 1; }
    SUBCASE("a FIFO") { tar += tar_member("v2/sm_90a/ab/fifo.cubin", "", '6'), expect = "a FIFO", skipped = 1; }
    SUBCASE("an arch this library does not know") {
      // consistent in itself: only the arch is wrong
      std::string s = side;
      s.replace(s.find("\"arch\":\"sm_90a\""), 15, "\"arch\":\"sm_99a\"");
      const std::string odd = "v2/sm_99a/" + key.substr(0, 2) + "/" + key;
      tar += tar_member(odd + ".cubin", body) + tar_member(odd + ".json", s);
      expect = "unknown arch", skipped = 2;
    }
    SUBCASE("a member over its size limit") {
      tar += tar_member("v2/sm_90a/ab/ab" + std::string(30, '0') + ".json", std::string(size_t(1) << 20, ' '));
      expect = "over the limit", skipped = 1;
    }
    SUBCASE("malformed tuning entries") {
      const TuningEntry ok = test::sm90_tuned_entry(4096, 4096, 8);
      REQUIRE(tuning_entry_problem(ok, Arch::sm_90a) == "");
      TuningEntry not_gemm = ok, odd_tile = test::sm90_tuned_entry(8192, 4096, 8), no_bucket = test::sm90_tuned_entry(1024, 4096, 9);
      not_gemm.tuned = dequantize_spec(Arch::sm_90a, 4096, DType::bf16, ScaleLayout::linear);
      GemmSpec odd = gemm_spec_of(odd_tile.tuned);
      odd.tile.block_m = 7;
      odd_tile.tuned = gemm_key(odd);
      std::string text = TuningTable::to_text({ok, not_gemm, odd_tile, no_bucket}, Arch::sm_90a, "Some GPU", 132,
                                              TuningVersions::current());
      text.insert(text.rfind("\n]}"), ",\n{\"spec\":{\"op\":\"gemm\",\"n\":\"x\"}}");  // a line that does not parse
      tar += tar_member("v2/tuning/" + TuningTable::file_name(Arch::sm_90a, "Some GPU", 132), text);
      expect = "has no tuned kernels", skipped = 4;
    }
    tar.append(1024, '\0');
    const std::string file = a.str() + "/in.tar";
    spit(file, tar);
    const auto r = run(with_cache(b.str()) + " cache import " + file + " --json");
    CAPTURE(r.err);
    CHECK(r.code == 1);
    CHECK(testutil::json_int(r.out, "kernels") == 1);
    CHECK(testutil::json_int(r.out, "skipped") == long(skipped));
    CHECK(r.err.find(expect) != std::string::npos);
    CHECK_FALSE(fs::exists(fs::path(b.str()) / "v2" / "sm_99a"));
    if (expect == "not a GEMM") {
      const TuningTable t(b.str() + "/v2/tuning/" + TuningTable::file_name(Arch::sm_90a, "Some GPU", 132), Arch::sm_90a,
                          "Some GPU", 132);
      CHECK(t.entries().size() == 1);  // only the well-formed one was written
    }
  }

  TEST_CASE("an archive over the size bound is refused before it is read") {
    testutil::TempDir a, b;
    const std::string file = a.str() + "/huge.tar";
    spit(file, "");
    fs::resize_file(file, (size_t(1) << 30) + 512);  // sparse: zeros read as the end of an archive
    const auto r = run(with_cache(b.str()) + " cache import " + file);
    CHECK(r.code == 1);
    CHECK(r.err.find("over the limit") != std::string::npos);
  }

  TEST_CASE("a sidecar that cannot be written leaves no CUBIN behind, and fails that key only") {
    testutil::TempDir dir;
    const std::string root = dir.str();
    const long n = kernel_count("8,128");
    const std::vector<fs::path> all = prewarmed_then_emptied(root);
    // a non-empty directory where one key's sidecar goes: that rename fails (EISDIR)
    const fs::path blocked = fs::path(all[0]).replace_extension(".json");
    fs::create_directories(blocked / "x");
    const auto r = run(with_cache(root) + " prewarm --shape 8,128 --arch sm_90a --json");
    CAPTURE(r.err);
    CHECK(r.code == 1);
    CHECK(testutil::json_int(r.out, "not_stored") == 1);
    CHECK_FALSE(fs::exists(all[0]));  // its CUBIN did not stay behind without a sidecar
    CHECK(long(cubins(root).size()) == n - 1);  // every other kernel was stored
  }

  TEST_CASE("a directory at one key's CUBIN path fails that key only, and clear removes it") {
    testutil::TempDir dir;
    const std::string root = dir.str();
    const long n = kernel_count("8,128");
    const std::vector<fs::path> all = prewarmed_then_emptied(root);
    fs::create_directories(all[0] / "inside");
    spit(all[0] / "inside" / "file", "x");
    const auto r = run(with_cache(root) + " prewarm --shape 8,128 --arch sm_90a --json");
    CAPTURE(r.err);
    CHECK(testutil::json_int(r.out, "not_stored") == 1);
    size_t stored = 0;
    for (const fs::path& c : all) stored += fs::is_regular_file(c);
    CHECK(long(stored) == n - 1);
    const auto clear = run(with_cache(root) + " cache clear");
    CAPTURE(clear.out);
    CAPTURE(clear.err);
    CHECK(clear.code == 0);
    CHECK_FALSE(fs::exists(all[0]));
    CHECK(cubins(root).empty());
  }

  TEST_CASE("a CUBIN without its sidecar past the grace period is a leftover that verify reports and sweeps remove") {
    testutil::TempDir dir;
    const std::string root = dir.str();
    REQUIRE(run(with_cache(root) + " prewarm --shape 8,128 --arch sm_90a --quiet").code == 0);
    const fs::path cubin = cubins(root)[0];
    fs::remove(fs::path(cubin).replace_extension(".json"));
    const timespec times[2] = {{::time(nullptr) - 200, 0}, {::time(nullptr) - 200, 0}};  // past the 120 s grace
    REQUIRE(::utimensat(AT_FDCWD, cubin.c_str(), times, 0) == 0);
    const auto v = run(with_cache(root) + " cache verify");
    CAPTURE(v.out);
    CHECK(v.out.find("leftover " + cubin.string()) != std::string::npos);
    CHECK(v.out.find("1 leftover files") != std::string::npos);
    SUBCASE("prune") { CHECK(run(with_cache(root) + " cache prune --older-than 100d").code == 0); }
    SUBCASE("clear") { CHECK(run(with_cache(root) + " cache clear").code == 0); }
    SUBCASE("verify --remove-bad") { CHECK(run(with_cache(root) + " cache verify --remove-bad").code == 0); }
    CHECK_FALSE(fs::exists(cubin));
  }

  TEST_CASE("an entry removed while verify lists it is gone, not bad") {
    testutil::TempDir dir;
    const std::string root = dir.str();
    const fs::path kk = fs::path(root) / "v2" / "sm_90a" / "ab";
    fs::create_directories(kk);
    for (fs::path p = kk; p != fs::path(root); p = p.parent_path()) ::chmod(p.c_str(), 0700);
    // many entries in one directory, so verify reads names the remover has since taken
    constexpr int kEntries = 4000;
    auto name = [](int i) { return fmt::format("ab{:030x}", i); };
    for (int i = 0; i < kEntries; ++i) {
      spit(kk / (name(i) + ".json"), "{}");
      spit(kk / (name(i) + ".cubin"), "not an ELF file");
    }
    std::atomic<bool> verifying{false};
    std::thread remover([&] {
      while (!verifying) std::this_thread::yield();
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      for (int i = kEntries - 1; i >= 0; --i) {  // as a clear does: the CUBIN, then its sidecar
        fs::remove(kk / (name(i) + ".cubin"));
        fs::remove(kk / (name(i) + ".json"));
        if (i % 8 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    });
    verifying = true;
    const auto v = run(with_cache(root) + " cache verify");
    remover.join();
    CHECK(v.out.find("BAD: missing (") == std::string::npos);
    CHECK(v.out.find("BAD: missing CUBIN") == std::string::npos);
  }
}
