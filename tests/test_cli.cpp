// The nvfp4-jit command as a user runs it.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "core/prewarm.hpp"
#include "core/tuning_table.hpp"
#include "test_util.hpp"

using testutil::cli;
using testutil::run;

namespace {
std::string with_cache(const testutil::TempDir& dir) { return "NVFP4_JIT_CACHE_DIR=" + dir.str() + " " + cli(); }

// How many kernels prewarm should visit for these shapes and archs.
long kernel_count(const std::vector<std::string>& shapes, std::vector<nvfp4::jit::detail::Arch> archs) {
  std::vector<nvfp4::jit::detail::WeightShape> ws;
  for (const auto& s : shapes) ws.push_back(nvfp4::jit::detail::parse_shape(s));
  return long(nvfp4::jit::detail::prewarm_specs(ws, archs).size());
}
}  // namespace

TEST_SUITE("cli") {
  TEST_CASE("prewarm of a built-in manifest for every arch, then again: the second run compiles nothing") {
    testutil::TempDir dir;
    const auto first = run(with_cache(dir) + " prewarm --manifest llama-3.1-8b --arch sm_90a,sm_100a,sm_120a --json");
    CAPTURE(first.err);
    REQUIRE(first.code == 0);
    using nvfp4::jit::detail::Arch;
    const long n = long(nvfp4::jit::detail::prewarm_specs(nvfp4::jit::detail::load_manifest("llama-3.1-8b"),
                                                          {Arch::sm_90a, Arch::sm_100a, Arch::sm_120a})
                            .size());
    CHECK(n >= 36);
    CHECK(testutil::json_int(first.out, "kernels") == n);
    CHECK(testutil::json_int(first.out, "compiled") == n);
    const auto second = run(with_cache(dir) + " prewarm --manifest llama-3.1-8b --arch sm_90a,sm_100a,sm_120a --json");
    CHECK(testutil::json_int(second.out, "compiled") == 0);
    CHECK(testutil::json_int(second.out, "cached") == n);
    const auto stats = run(with_cache(dir) + " cache stats --json");
    CHECK(testutil::json_int(stats.out, "entries") == n);
    const auto lines = run(with_cache(dir) + " prewarm --shape 8,64 --arch sm_90a");
    CHECK(lines.err.find("compiled") != std::string::npos);  // plain lines when not on a terminal
    const long fresh = kernel_count({"8,64"}, {Arch::sm_90a}) - 1;  // the amax finalize kernel is shared
    CHECK(lines.out.find(std::to_string(fresh) + " compiled, 1 cache hits, 0 failed") != std::string::npos);
  }

  TEST_CASE("prewarm picks GEMM tiles for the SM count it is given") {
    testutil::TempDir dir;
    const auto r = run(with_cache(dir) + " prewarm --shape 8,256 --arch sm_90a --sms 78 --json");
    REQUIRE(r.code == 0);
    const long n = long(nvfp4::jit::detail::prewarm_specs({nvfp4::jit::detail::parse_shape("8,256")},
                                                          {nvfp4::jit::detail::Arch::sm_90a}, 78)
                            .size());
    CHECK(testutil::json_int(r.out, "kernels") == n);
    CHECK(run(with_cache(dir) + " prewarm --shape 8,256 --sms 0").code == 2);
  }

  TEST_CASE("cache verify finds a corrupted entry; --remove-bad removes it; clear empties the root") {
    testutil::TempDir dir;
    REQUIRE(run(with_cache(dir) + " prewarm --shape 8,256 --arch sm_90a --quiet").code == 0);
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir.path))
      if (e.path().extension() == ".cubin") {
        std::filesystem::resize_file(e.path(), 100);
        break;
      }
    const auto bad = run(with_cache(dir) + " cache verify");
    CHECK(bad.code == 1);
    CHECK(bad.out.find("1 bad") != std::string::npos);
    CHECK(run(with_cache(dir) + " cache verify --remove-bad").code == 0);
    const long n = kernel_count({"8,256"}, {nvfp4::jit::detail::Arch::sm_90a});
    CHECK(run(with_cache(dir) + " cache verify").out.find(std::to_string(n - 1) + " entries, 0 bad") != std::string::npos);
    CHECK(run(with_cache(dir) + " cache clear").code == 0);
    CHECK(testutil::json_int(run(with_cache(dir) + " cache stats --json").out, "entries") == 0);
  }

  TEST_CASE("cache export / import round trip ships kernels and tuning tables; damaged members are refused") {
    testutil::TempDir a, b;
    REQUIRE(run(with_cache(a) + " prewarm --shape 8,256 --arch sm_90a --quiet").code == 0);
    using namespace nvfp4::jit::detail;
    const std::string table = a.str() + "/v1/tuning/" + TuningTable::file_name(Arch::sm_90a, "Some GPU", 132);
    TuningEntry e;
    e.problem.op = Op::gemm;
    e.problem.n = 256, e.problem.k = 256;
    e.m_bucket = 8;
    e.tile.block_m = 8, e.tile.block_n = 128, e.tile.block_k = 256, e.tile.stages = 4, e.tile.split_k = 1;
    e.tile.threads = 384;  // a tile the GEMM can run: import checks that
    REQUIRE(TuningTable(table, Arch::sm_90a, "Some GPU", 132).record({e}) == "");
    const long n = kernel_count({"8,256"}, {Arch::sm_90a});
    const std::string file = a.str() + "/shipped.tar";
    const auto out = run(with_cache(a) + " cache export " + file + " --json");
    CAPTURE(out.err);
    REQUIRE(out.code == 0);
    CHECK(testutil::json_int(out.out, "kernels") == n);
    CHECK(testutil::json_int(out.out, "tables") == 1);
    CHECK(run("tar -tf " + file + " | grep -c cubin").out == std::to_string(n) + "\n");  // a plain tar file

    const auto in = run(with_cache(b) + " cache import " + file + " --json");
    CAPTURE(in.err);
    CHECK(in.code == 0);
    CHECK(testutil::json_int(in.out, "kernels") == n);
    CHECK(run(with_cache(b) + " cache verify").out.find(std::to_string(n) + " entries, 0 bad") != std::string::npos);
    CHECK(TuningTable(b.str() + "/v1/tuning/" + TuningTable::file_name(Arch::sm_90a, "Some GPU", 132), Arch::sm_90a,
                      "Some GPU", 132)
              .find(e.problem, 8));
    CHECK(testutil::json_int(run(with_cache(b) + " prewarm --shape 8,256 --arch sm_90a --json").out, "compiled") == 0);
    // importing again adds nothing
    CHECK(testutil::json_int(run(with_cache(b) + " cache import " + file + " --json").out, "already_present") == n);

    // a flipped byte inside a cubin: that entry is refused, the others still come in
    testutil::TempDir c;
    std::string tar;
    {
      std::ifstream f(file, std::ios::binary);
      tar.assign(std::istreambuf_iterator<char>(f), {});
    }
    tar[tar.find("\x7f" "ELF") + 200] ^= 0x55;
    { std::ofstream(a.str() + "/damaged.tar", std::ios::binary) << tar; }
    const auto damaged = run(with_cache(c) + " cache import " + a.str() + "/damaged.tar --json");
    CHECK(damaged.code == 1);
    CHECK(damaged.err.find("checksum") != std::string::npos);
    CHECK(testutil::json_int(damaged.out, "kernels") == n - 1);
    CHECK(run(with_cache(c) + " cache verify").code == 0);
    // not a tar file at all
    { std::ofstream(a.str() + "/junk.tar") << std::string(2048, 'x'); }
    CHECK(run(with_cache(c) + " cache import " + a.str() + "/junk.tar").code == 1);
  }

  TEST_CASE("cache prune removes entries older than the given age only") {
    testutil::TempDir dir;
    REQUIRE(run(with_cache(dir) + " prewarm --shape 8,256 --arch sm_90a --quiet").code == 0);
    const long n = kernel_count({"8,256"}, {nvfp4::jit::detail::Arch::sm_90a});
    CHECK(testutil::json_int(run(with_cache(dir) + " cache prune --older-than 1d --json").out, "removed_entries") == 0);
    CHECK(run(with_cache(dir) + " cache prune --older-than 1x").code == 2);
    CHECK(run(with_cache(dir) + " cache prune").code == 2);
    ::sleep(1);
    CHECK(testutil::json_int(run(with_cache(dir) + " cache prune --older-than 0s --json").out, "removed_entries") == n);
    CHECK(testutil::json_int(run(with_cache(dir) + " cache stats --json").out, "entries") == 0);
  }

  TEST_CASE("a read-only cache directory degrades to memory-only with one warning; prewarm says it stored nothing") {
    testutil::TempDir dir;
    const std::string root = dir.str() + "/ro";
    std::filesystem::create_directory(root);
    std::string prefix;
    if (::geteuid() == 0) {
      // root ignores permissions: run the command as an unprivileged user that owns the dir.
      REQUIRE(::chown(root.c_str(), 65534, 65534) == 0);
      ::chmod(dir.str().c_str(), 0755);
      prefix = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
    }
    ::chmod(root.c_str(), 0500);
    const auto r = run("NVFP4_JIT_CACHE_DIR=" + root + " " + prefix + cli() + " prewarm --shape 8,512 --arch sm_90a --json");
    CAPTURE(r.err);
    CHECK(r.code == 1);  // a prewarm that could not fill the cache failed
    const long n = kernel_count({"8,512"}, {nvfp4::jit::detail::Arch::sm_90a});
    CHECK(testutil::json_int(r.out, "compiled") == n);
    CHECK(testutil::json_int(r.out, "not_stored") == n);
    size_t warnings = 0;
    for (size_t pos = 0; (pos = r.err.find("memory only", pos)) != std::string::npos; ++pos) ++warnings;
    CHECK(warnings == 1);
    CHECK(std::filesystem::is_empty(root));
  }

  TEST_CASE("usage errors exit 2 with a message naming the problem") {
    auto r = run(cli() + " prewarm --shape 10,17");
    CHECK(r.code == 2);
    CHECK(r.err.find("K = 17 must be a positive multiple of 16") != std::string::npos);
    r = run(cli() + " prewarm --shape 8,64 --arch sm_80");
    CHECK(r.code == 2);
    CHECK(r.err.find("unknown arch `sm_80`") != std::string::npos);
    r = run(cli() + " prewarm --manifest no-such-model");
    CHECK(r.code == 2);
    CHECK(r.err.find("no-such-model") != std::string::npos);
    CHECK(run(cli() + " frobnicate").code == 2);
    CHECK(run(cli() + " cache").code == 2);
    CHECK(run(cli() + " prewarm --bogus").code == 2);
  }

  TEST_CASE("--help on every verb, info and --version work without a GPU") {
    for (const char* verb : {"prewarm", "tune", "cache", "info", "bench"}) {
      const auto r = run(cli() + " " + verb + " --help");
      CHECK(r.code == 0);
      CHECK(r.out.find("usage: nvfp4-jit") != std::string::npos);
    }
    const auto info = run(cli() + " info --json");
    CHECK(info.code == 0);
    CHECK(info.out.find("\"nvrtc\":\"") != std::string::npos);
    CHECK(info.out.find("llama-3.1-8b") != std::string::npos);
    CHECK(run(cli() + " --version").out.find("nvfp4-jit 0.") == 0);
    // tune needs a GPU: exit 3 here, after checking its arguments (exit 2)
    CHECK(run(cli() + " tune --shape 256,256").code == 3);
    CHECK(run(cli() + " tune").code == 2);
    CHECK(run(cli() + " tune --shape 256,256 --layout diagonal").code == 2);
    // bench checks its arguments (exit 2) before it looks for a GPU (exit 3 here)
    CHECK(run(cli() + " bench gemm --shape 8192,8192 --m 1").code == 3);
    auto r = run(cli() + " bench gemm --shape 8192");
    CHECK(r.code == 2);
    CHECK(r.err.find("--shape `8192`") != std::string::npos);
    r = run(cli() + " bench gemm --m 0");
    CHECK(r.code == 2);
    CHECK(r.err.find("--m 0") != std::string::npos);
    CHECK(run(cli() + " bench gemm --m many").code == 2);
    CHECK(run(cli() + " bench gemm --m 1,257,4096").code == 3);
    r = run(cli() + " bench gemm --m 1,x");
    CHECK(r.code == 2);
    CHECK(r.err.find("--m x") != std::string::npos);
    r = run(cli() + " bench quantize --m 16");
    CHECK(r.code == 2);
    CHECK(r.err.find("--shape and --m are for `bench gemm`") != std::string::npos);
  }

  TEST_CASE("shapes out of range stop early, naming the manifest's file and line") {
    testutil::TempDir dir;
    const std::string manifest = dir.str() + "/model.txt";
    auto write = [&](const std::string& text) { std::ofstream(manifest) << text; };
    auto prewarm = [&](const std::string& what) { return run(with_cache(dir) + " prewarm --arch sm_90a " + what); };
    write("# a model\nq 4096 4096\nhuge 9223372036854775807 4096\n");
    auto r = prewarm("--manifest " + manifest);
    CHECK(r.code == 2);
    CHECK(r.err.find(manifest + ":3: N = 9223372036854775807 must be 1 to 2147483647") != std::string::npos);
    write("experts 4096 4096 4294967297\n");  // not truncated to 1 group
    r = prewarm("--manifest " + manifest);
    CHECK(r.code == 2);
    CHECK(r.err.find(manifest + ":1: groups = 4294967297 must be 1 to 65536") != std::string::npos);
    write("k 4096 4294967296\n");
    CHECK(prewarm("--manifest " + manifest).err.find(":1: K = 4294967296") != std::string::npos);
    write("n 4096 abc\n");
    CHECK(prewarm("--manifest " + manifest).err.find(":1: expected `<name> <N> <K> [groups]`") != std::string::npos);
    r = prewarm("--shape 9223372036854775807,4096");
    CHECK(r.code == 2);
    CHECK(r.err.find("N = 9223372036854775807 must be 1 to 2147483647") != std::string::npos);
    CHECK(prewarm("--shape 64,64,0").code == 2);
    CHECK(testutil::json_int(run(with_cache(dir) + " cache stats --json").out, "entries") == 0);  // nothing compiled
  }

  TEST_CASE("a shape whose K no GEMM serves says it gets no GEMM kernels") {
    testutil::TempDir dir;
    const auto r = run(with_cache(dir) + " prewarm --shape 64,48 --arch sm_90a --json");
    CAPTURE(r.err);
    CHECK(r.code == 0);
    CHECK(r.err.find("`64,48` (N = 64, K = 48): no GEMM kernels: K = 48 is not a multiple of 32") != std::string::npos);
    CHECK(testutil::json_int(r.out, "kernels") == kernel_count({"64,48"}, {nvfp4::jit::detail::Arch::sm_90a}));
    CHECK(run(with_cache(dir) + " prewarm --shape 64,64 --arch sm_90a --quiet").err.find("no GEMM kernels") ==
          std::string::npos);
  }

  TEST_CASE("the benchmarks --help lists are the ones bench runs") {
    const std::string refusal = run(cli() + " bench frobnicate").err;
    const size_t open = refusal.find("(one of: ");
    REQUIRE(open != std::string::npos);
    const std::string list = refusal.substr(open + 9, refusal.find(')', open) - open - 9);
    const std::string usage = run(cli() + " bench --help").out;
    const std::string help = run(cli() + " --help").out;
    std::istringstream names(list);
    for (std::string trimmed; std::getline(names, trimmed, ',');) {
      trimmed.erase(0, trimmed.find_first_not_of(' '));
      CAPTURE(trimmed);
      CHECK(usage.find(trimmed) != std::string::npos);
      CHECK(help.find(trimmed) != std::string::npos);
    }
  }
}
