// The nvfp4-jit command as a user runs it.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/model_shapes.hpp"
#include "core/prewarm.hpp"
#include "core/tuning_table.hpp"
#include "nvfp4/jit.hpp"
#include "ops/dequantize_op.hpp"
#include "ops/gemm/launch.hpp"
#include "ops/gemm/tile_choice.hpp"
#include "gemm_test_util.hpp"
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
    const auto r = run(with_cache(dir) + " prewarm --shape 8,256 --arch sm_90a --sms 78 -j2 --json");  // make's -jN too
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
    const std::string table = a.str() + "/v2/tuning/" + TuningTable::file_name(Arch::sm_90a, "Some GPU", 132);
    const TuningEntry e = test::sm90_tuned_entry(256, 256, 8);  // a tile the GEMM can run: import checks that
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
    CHECK(TuningTable(b.str() + "/v2/tuning/" + TuningTable::file_name(Arch::sm_90a, "Some GPU", 132), Arch::sm_90a,
                      "Some GPU", 132)
              .find(e.problem(), 8));
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
    r = run(cli() + " tune --shape 4096,7168,256 --grouped batched");
    CHECK(r.code == 2);
    CHECK(r.err.find("--grouped is contiguous or masked") != std::string::npos);
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
    // the bandwidth benches take rows (--m) and row lengths (--k); no GPU here: exit 3
    CHECK(run(cli() + " bench quantize --m 16").code == 3);
    CHECK(run(cli() + " bench swiglu-quantize --m 8,128 --k 2048,7168").code == 3);
    CHECK(run(cli() + " bench moe-stage --m 1,16 --k 7168").code == 3);
    r = run(cli() + " bench grouped --m 16");
    CHECK(r.code == 2);
    CHECK(r.err.find("--m is for `bench gemm` and the bandwidth benches") != std::string::npos);
    // a usage error (exit 2) whose message holds `message`
    auto usage_error = [&](const std::string& arguments, const std::string& message) {
      CAPTURE(arguments);
      const auto e = run(cli() + arguments);
      CHECK(e.code == 2);
      CHECK(e.err.find(message) != std::string::npos);
    };
    usage_error(" bench quantize --shape 4096,4096", "--shape is for `bench gemm` and `bench grouped`");
    usage_error(" bench gemm --k 4096", "--k is for the bandwidth benches");
    usage_error(" bench rmsnorm-quantize --k 4100", "--k 4100: a multiple of 32");
    usage_error(" bench dequantize --k 0", "--k 0");
    // bench grouped: expert shapes N,K,G and the experts a token is routed to
    CHECK(run(cli() + " bench grouped --shape 4096,7168,256 --topk 8 --tokens 16").code == 3);
    CHECK(run(cli() + " bench grouped --shape 1536,2048,128").code == 3);
    usage_error(" bench grouped --shape 1536,2048,4", "--shape 1536,2048,4: 4 experts, fewer than the 8 each token is routed to");
    usage_error(" bench grouped --shape 1536,2048,4 --topk 0", "--topk 0");
    usage_error(" bench grouped --topk 4", "--topk takes one count, for the experts of --shape N,K,G");
    usage_error(" bench gemm --topk 4", "--topk is for `bench grouped`");
    usage_error(" bench grouped --shape 1536,2048,8 --topk 4,2", "--topk takes one count");
    usage_error(" bench grouped --shape 1536,2048,8 --topk 9", "--shape 1536,2048,8: 8 experts, fewer than the 9 each token is routed to");
    usage_error(" bench grouped --shape 1536,2048", "--shape 1536,2048: give the experts too (N,K,G)");
    usage_error(" bench gemm --shape 1536,2048,8", "--shape 1536,2048,8: experts are for `bench grouped`");
    usage_error(" bench grouped --shape 1536,2048,1024", "--shape 1536,2048,1024: at most 512 experts");
    usage_error(" bench grouped --shape 1536,2064,128", "--shape 1536,2064,128: K must be a multiple of 32");
    r = run(cli() + " bench quantize --in-dtype fp16");
    CHECK(r.code == 2);
    CHECK(r.err.find("--in-dtype is for `bench swiglu-quantize` and `bench rmsnorm-quantize`") != std::string::npos);
    r = run(cli() + " bench swiglu-quantize --in-dtype fp32");
    CHECK(r.code == 2);
    CHECK(r.err.find("--in-dtype fp32: bf16 or fp16 (fp32 too for rmsnorm-quantize)") != std::string::npos);
    r = run(cli() + " bench rmsnorm-quantize --in-dtype fp8");
    CHECK(r.code == 2);
    CHECK(r.err.find("--in-dtype fp8: bf16 or fp16") != std::string::npos);
    CHECK(run(cli() + " bench swiglu-quantize --in-dtype fp16").code == 3);
    CHECK(run(cli() + " bench rmsnorm-quantize --in-dtype fp32").code == 3);
    r = run(cli() + " bench swiglu-quantize --weight-fp32");
    CHECK(r.code == 2);
    CHECK(r.err.find("--weight-fp32 is for `bench rmsnorm-quantize`") != std::string::npos);
    CHECK(run(cli() + " bench rmsnorm-quantize --weight-fp32").code == 3);
    r = run(cli() + " bench quantize --per-row");
    CHECK(r.code == 2);
    CHECK(r.err.find("--per-row is for `bench rmsnorm-quantize`, `swiglu-quantize`, `mhc-rmsnorm-quantize` and `moe-stage`") !=
          std::string::npos);
    CHECK(run(cli() + " bench moe-stage --per-row").code == 3);
  }

  TEST_CASE("each verb's --help lists its flags; the top help lists the verbs and --version") {
    const std::vector<std::pair<std::string, std::vector<std::string>>> flags = {
        {"prewarm", {"--model DIR", "--tp N", "--shape N,K[,G]", "-j N", "--sms N|GPU", "--norm-weight LIST", "--list"}},
        {"tune", {"--runs R", "--layout", "--grouped", "--json"}},
        {"cache", {"ACTION", "FILE", "--older-than AGE", "--remove-bad"}},
        {"info", {"--json"}},
        {"bench", {"BENCHMARK", "--out FILE.json", "--expected-m", "--per-row"}}};
    for (const auto& [verb, names] : flags) {
      const auto r = run(cli() + " " + verb + " --help");
      CAPTURE(verb);
      CHECK(r.code == 0);
      CHECK(r.out.find("usage: nvfp4-jit " + verb + " [options]") == 0);
      for (const std::string& name : names) {
        CAPTURE(name);
        CHECK(r.out.find(name) != std::string::npos);
      }
      CHECK(run(cli() + " help " + verb).out == r.out);
    }
    const auto top = run(cli() + " --help");
    CHECK(top.code == 0);
    CHECK(top.out.find("--version") != std::string::npos);
    for (const char* verb : {"prewarm", "tune", "cache", "info", "bench"}) CHECK(top.out.find(std::string("  ") + verb) != std::string::npos);
    const auto version = run(cli() + " --version");
    CHECK(version.code == 0);
    CHECK(version.out == std::string("nvfp4-jit ") + nvfp4::jit::version() + "\n");
    const auto bare = run(cli());  // no verb: the help, on stderr, as a usage error
    CHECK(bare.code == 2);
    CHECK(bare.out.empty());
    CHECK(bare.err.find("usage: nvfp4-jit") == 0);
  }

  TEST_CASE("a mistyped verb, benchmark, cache action or flag is named with the nearest known one") {
    auto suggests = [](const std::string& arguments, const std::string& message) {
      CAPTURE(arguments);
      const auto r = run(cli() + arguments);
      CHECK(r.code == 2);
      CHECK(r.out.empty());
      CHECK(r.err.find(message) != std::string::npos);
    };
    suggests(" prewarn --shape 8,64", "unknown verb `prewarn` (did you mean `prewarm`?)");
    suggests(" bench gemmm", "unknown benchmark `gemmm` (one of: ");
    suggests(" bench gemmm", "(did you mean `gemm`?)");
    suggests(" cache stat", "unknown cache action `stat` (did you mean `stats`?)");
    suggests(" prewarm --shpe 8,64", "unknown option `--shpe` (did you mean `--shape`?)");
    suggests(" tune --shape 64,64 --runz 3", "unknown option `--runz` (did you mean `--runs`?)");
    // nothing near: no suggestion
    const auto far = run(cli() + " frobnicate");
    CHECK(far.code == 2);
    CHECK(far.err == "nvfp4-jit: unknown verb `frobnicate`\nrun `nvfp4-jit --help`\n");
  }

  TEST_CASE("a usage error is two lines: the verb, the flag and what it expects; then where the help is") {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {" prewarm --shape 8,64 --list -j x", "nvfp4-jit prewarm: -j: expects an integer from 1 to 256, got `x`\n"},
        {" prewarm --shape", "nvfp4-jit prewarm: --shape expects N,K[,G], got nothing\n"},
        {" prewarm --shape 8,64 stray", "nvfp4-jit prewarm: unexpected argument `stray`\n"},
        {" cache stats extra", "nvfp4-jit cache: unexpected argument `extra`\n"},
        {" tune --shape 64,64 --runs 0", "nvfp4-jit tune: --runs: expects an integer from 1 to 10000, got `0`\n"}};
    for (const auto& [arguments, first_line] : cases) {
      CAPTURE(arguments);
      const auto r = run(cli() + arguments);
      const std::string verb = arguments.substr(1, arguments.find(' ', 1) - 1);
      CHECK(r.code == 2);
      CHECK(r.err == first_line + "run `nvfp4-jit " + verb + " --help`\n");
    }
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
    CHECK(prewarm("--manifest " + manifest).err.find(":1: expected `<name> <N> <K> [groups] [key=value...]`") != std::string::npos);
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

// The capture error's command, run with --list: what it would compile.
namespace {

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;

struct CallCase {
  std::string what;
  Arch arch;
  GemmArgs g;
  int32_t groups = 0;  // > 0: a grouped call
  GroupedLayout layout = GroupedLayout::contiguous;
};

// Non-null, aligned stand-ins: the CPU tests validate and choose, they never launch.
GemmArgs fake_args(int64_t m, int64_t n, int64_t k) {
  alignas(256) static unsigned char buffer[256];
  GemmArgs g;
  g.m = m, g.n = n, g.k = k;
  g.a = g.b.data = g.b.scales = g.d = buffer;
  return g;
}

// The kernels the call loads, as gemm's dispatch chooses them on a device of `sms` SMs.
std::vector<KernelSpec> call_kernels(const CallCase& c, int sms, GemmCall* out) {
  GemmCall call;
  if (c.groups) {
    GroupedGemmArgs ga;
    ga.gemm = c.g, ga.groups = c.groups, ga.layout = c.layout;
    static const int32_t sizes[1] = {0};
    ga.group_ends = ga.masked_m = sizes;
    call = grouped_gemm_call(ga, "test");
  } else {
    call = gemm_call(c.g, "test");
  }
  *out = call;
  const GemmBackend& backend = gemm_backend(c.arch, "test");
  std::vector<KernelSpec> kernels;
  GemmCall gemm = call;
  if (c.g.a_dtype == DType::nvfp4 && !backend.native_fp4_activations()) {
    gemm = gemm_call_on_decoded_a(call, c.g.d);
    kernels.push_back(dequantize_spec(c.arch, c.g.k, DType::bf16, c.g.a_fp4.scale_layout));
  }
  const GemmSpec problem = gemm_problem(c.arch, gemm);
  REQUIRE(backend.unsupported(problem).empty());
  kernels.push_back(
      gemm_key(gemm_kernel_spec(backend, problem, gemm_tile_choice(backend, problem, nullptr, gemm_tile_rows(gemm), sms))));
  return kernels;
}

}  // namespace

TEST_SUITE("cli") {
  TEST_CASE("the capture error's prewarm command builds the kernels of the call's variant") {
    std::vector<CallCase> cases;
    auto add = [&](std::string what, Arch arch, int64_t m, auto&& set) {
      CallCase c{std::move(what), arch, fake_args(m, 384, 512)};
      set(c);
      cases.push_back(c);
    };
    add("fp16 A, fp32 out, bf16 bias", Arch::sm_90a, 7, [](CallCase& c) {
      c.g.a_dtype = DType::fp16, c.g.d_dtype = DType::fp32, c.g.bias = c.g.d, c.g.bias_dtype = DType::bf16;
    });
    add("fp16 out, fp32 bias, swizzled weight scales", Arch::sm_90a, 300, [](CallCase& c) {
      c.g.d_dtype = DType::fp16, c.g.bias = c.g.d, c.g.bias_dtype = DType::fp32;
      c.g.b.scale_layout = ScaleLayout::swizzled128x4;
    });
    add("prepacked weight, fp16 A", Arch::sm_90a, 4096, [](CallCase& c) { c.g.b_prepacked = true, c.g.a_dtype = DType::fp16; });
    add("W4A4 on sm_90a (decoded A), linear A scales, fp32 out", Arch::sm_90a, 33, [](CallCase& c) {
      c.g.a = nullptr, c.g.a_dtype = DType::nvfp4, c.g.a_fp4.data = c.g.a_fp4.scales = c.g.d, c.g.d_dtype = DType::fp32;
    });
    add("W4A4 on sm_120a, linear A scales, bf16 bias", Arch::sm_120a, 64, [](CallCase& c) {
      c.g.a = nullptr, c.g.a_dtype = DType::nvfp4, c.g.a_fp4.data = c.g.a_fp4.scales = c.g.d;
      c.g.bias = c.g.d, c.g.bias_dtype = DType::bf16;
    });
    add("masked grouped, fp16 A", Arch::sm_90a, 40, [](CallCase& c) {
      c.groups = 8, c.layout = GroupedLayout::masked, c.g.a_dtype = DType::fp16;
    });
    testutil::TempDir dir;
    for (const CallCase& c : cases)
      for (int sms : {114, 132}) {
        CAPTURE(c.what);
        CAPTURE(sms);
        DeviceInfo device;
        device.arch = c.arch, device.sm_count = sms;
        GemmCall call;
        const std::vector<KernelSpec> kernels = call_kernels(c, sms, &call);
        const std::string hint = gemm_prewarm_hint(call, device);
        CAPTURE(hint);
        REQUIRE(hint.rfind("nvfp4-jit prewarm ", 0) == 0);
        const auto listed = run(with_cache(dir) + hint.substr(std::string("nvfp4-jit").size()) + " --list");
        REQUIRE(listed.code == 0);
        for (const KernelSpec& spec : kernels) {
          CAPTURE(spec.describe());
          CHECK(listed.out.find(spec.to_json()) != std::string::npos);
        }
        // the command of before (shape, arch and SM count only) did not build this call's GEMM
        const std::string plain = hint.substr(0, hint.find(" --a-dtype"));
        CHECK(run(with_cache(dir) + plain.substr(std::string("nvfp4-jit").size()) + " --list").out.find(kernels.back().to_json()) ==
              std::string::npos);
      }
    CHECK(testutil::json_int(run(with_cache(dir) + " cache stats --json").out, "entries") == 0);  // --list compiles nothing
  }

  TEST_CASE("prewarm variants: flags and manifest fields choose the GEMMs and quantizers compiled") {
    testutil::TempDir dir;
    auto list = [&](const std::string& what) { return run(with_cache(dir) + " prewarm --arch sm_90a --list " + what); };
    auto count = [](const std::string& out, const std::string& needle) {
      size_t n = 0;
      for (size_t at = out.find(needle); at != std::string::npos; at = out.find(needle, at + 1)) ++n;
      return n;
    };
    const auto plain = list("--shape 256,512");
    REQUIRE(plain.code == 0);
    CHECK(count(plain.out, "\"op\":\"gemm\"") > 0);
    // (an sm_90a GEMM kernel takes N as an argument: n is 0 in its spec)
    CHECK(count(plain.out, "\"op\":\"gemm\",\"arch\":\"sm_90a\",\"n\":0,\"k\":512,\"groups\":0,\"a_dtype\":\"bf16\","
                           "\"out_dtype\":\"fp32\"") == 0);  // BF16 out by default
    // one weight layout, two output dtypes, with and without a bias: four problems of the same tiles
    const auto four = list("--shape 256,512 --b-layout linear --d-dtype bf16,fp32 --bias none,fp32");
    REQUIRE(four.code == 0);
    const auto one = list("--shape 256,512 --b-layout linear");
    const size_t tiles = count(one.out, "\"op\":\"gemm\"");
    CHECK(tiles > 0);
    CHECK(count(four.out, "\"op\":\"gemm\"") == 4 * tiles);
    CHECK(count(four.out, "\"bias\":\"fp32\",") == 2 * tiles);
    // the fp32-input quantizers only when asked for
    CHECK(plain.out.find("nvfp4_quantize_k512_fp32") == std::string::npos);
    CHECK(list("--shape 256,512 --in-dtype fp32").out.find("nvfp4_quantize_k512_fp32") != std::string::npos);
    // the quantizers of the ops that write the activations, and only those
    const auto swiglu = list("--shape 256,512 --a-from swiglu");
    REQUIRE(swiglu.code == 0);
    CHECK(swiglu.out.find("nvfp4_swiglu_quantize_k512") != std::string::npos);
    CHECK(swiglu.out.find("nvfp4_rmsnorm_quantize_k512") == std::string::npos);
    CHECK(plain.out.find("nvfp4_rmsnorm_quantize_k512") != std::string::npos);
    CHECK(run(cli() + " prewarm --shape 256,512 --a-from gelu --list").code == 2);
    // RMSNorm's fp32 weight only when asked for
    CHECK(plain.out.find("nvfp4_rmsnorm_quantize_k512_bf16_linear_wfp32") == std::string::npos);
    CHECK(list("--shape 256,512 --norm-weight fp32").out.find("nvfp4_rmsnorm_quantize_k512_bf16_linear_wfp32") != std::string::npos);
    const auto bad_weight = run(cli() + " prewarm --shape 256,512 --norm-weight bf16 --list");
    CHECK(bad_weight.code == 2);
    CHECK(bad_weight.err.find("--norm-weight: `bf16` is not one of input, fp32") != std::string::npos);
    // the GEMM's SwiGLU epilogue only when asked for, on the prepacked weight
    CHECK(plain.out.find("_prepacked_swiglu_") == std::string::npos);
    const auto fused = list("--shape 256,512 --epilogue none,swiglu");
    REQUIRE(fused.code == 0);
    CHECK(fused.out.find("_prepacked_swiglu_") != std::string::npos);
    CHECK(fused.out.find("_linear_swiglu_") == std::string::npos);
    CHECK(run(cli() + " prewarm --shape 256,512 --epilogue gelu --list").err.find("--epilogue: `gelu` is not one of none, swiglu") !=
          std::string::npos);
    // a manifest line's own fields replace the flags' for that line only
    const std::string manifest = dir.str() + "/model.txt";
    std::ofstream(manifest) << "qkv 256 512 b-layout=linear d-dtype=fp16\no 512 1024\n";  // told apart by K
    const auto mixed = list("--manifest " + manifest + " --d-dtype fp32");
    REQUIRE(mixed.code == 0);
    CHECK(mixed.out.find("\"n\":0,\"k\":512,\"groups\":0,\"a_dtype\":\"bf16\",\"out_dtype\":\"fp16\"") !=
          std::string::npos);
    CHECK(mixed.out.find("\"n\":0,\"k\":512,\"groups\":0,\"a_dtype\":\"bf16\",\"out_dtype\":\"fp32\"") ==
          std::string::npos);
    CHECK(mixed.out.find("\"n\":0,\"k\":1024,\"groups\":0,\"a_dtype\":\"bf16\",\"out_dtype\":\"fp32\"") !=
          std::string::npos);
    // moe_route's capture hint (K = 16: no GEMM) builds the routing of its group count: both id types, one CTA or many
    const auto route = list("--shape 16,16,64");
    REQUIRE(route.code == 0);
    CHECK(count(route.out, "\"op\":\"moe_route\",\"arch\":\"sm_90a\",\"experts\":64,") == 4);
    CHECK(count(route.out, "\"op\":\"gemm\"") == 0);
    // bad values are usage errors naming the flag or the manifest line
    auto r = list("--shape 256,512 --d-dtype fp8");
    CHECK(r.code == 2);
    CHECK(r.err.find("--d-dtype: `fp8` is not one of bf16, fp16, fp32") != std::string::npos);
    CHECK(list("--shape 256,512 --bias bf16,bf16").err.find("--bias: `bf16` is given twice") != std::string::npos);
    std::ofstream(manifest) << "qkv 256 512 colour=red\n";
    r = list("--manifest " + manifest);
    CHECK(r.code == 2);
    CHECK(r.err.find("model.txt:1: `colour` is not a variant") != std::string::npos);
  }

  TEST_CASE("prewarm takes an SM count or a GPU's name") {
    testutil::TempDir dir;
    auto list = [&](const std::string& sms) {
      return run(with_cache(dir) + " prewarm --arch sm_90a --shape 4096,4096 --b-layout linear --list --sms " + sms);
    };
    CHECK(list("h100-pcie").out == list("114").out);
    CHECK(list("H100_SXM").out == list("132").out);
    CHECK(list("h100-pcie").out != list("132").out);  // tiles chosen for 114 SMs differ
    const auto r = list("h300");
    CHECK(r.code == 2);
    CHECK(r.err.find("--sms `h300` is neither an SM count nor a GPU we know (h100-sxm (132), h100-pcie (114)") !=
          std::string::npos);
  }

  TEST_CASE("prewarm --model: --shapes prints one rank's manifest; --tp that does not divide is a usage error") {
    testutil::TempDir model;  // Llama-3.1-70B's numbers
    std::ofstream(model.path / "config.json") << R"({"model_type": "llama", "hidden_size": 8192, "intermediate_size": 28672,
      "num_attention_heads": 64, "num_key_value_heads": 8, "num_hidden_layers": 80})";
    std::ofstream(model.path / "hf_quant_config.json")
        << R"({"quantization": {"quant_algo": "NVFP4", "group_size": 16, "exclude_modules": ["lm_head"]}})";
    const auto r = run(cli() + " prewarm --model " + model.str() + " --tp 8 --shapes");
    CHECK(r.code == 0);
    CAPTURE(r.out);
    CHECK(r.out.find("# " + model.str() + ": model_type llama, 80 layers") == 0);
    CHECK(r.out.find("--tp 8 --ep 1") != std::string::npos);
    for (const char* line : {"\nmodel.layers.*.self_attn.qkv_proj 1280 8192 1 a-from=rmsnorm,quantize\n",  // (64 + 2 x 8) x 128 / 8
                             "\nmodel.layers.*.self_attn.o_proj 8192 1024 1 a-from=quantize\n",            // 64 x 128 / 8
                             "\nmodel.layers.*.mlp.gate_up_proj 7168 8192 1 a-from=rmsnorm,quantize\n",    // 2 x 28672 / 8
                             "\nmodel.layers.*.mlp.down_proj 8192 3584 1 a-from=swiglu,quantize\n"})       // 28672 / 8
      CHECK(r.out.find(line) != std::string::npos);
    CHECK(nvfp4::jit::detail::parse_manifest(r.out, "stdout").size() == 4);  // a manifest as it is
    // --list: the kernels of those shapes, compiling nothing
    const auto list = run(with_cache(model) + " prewarm --model " + model.str() + " --tp 8 --arch sm_90a --list");
    CHECK(list.code == 0);
    namespace d = nvfp4::jit::detail;
    CHECK(std::count(list.out.begin(), list.out.end(), '\n') ==
          long(d::prewarm_specs(d::derive_model_shapes(model.str(), 8, 1).shapes, {d::Arch::sm_90a}).size()));

    const auto bad = run(cli() + " prewarm --model " + model.str() + " --tp 3 --shapes");
    CHECK(bad.code == 2);
    CHECK(bad.err.find("config.json: num_attention_heads 64 is not divisible by tp 3") != std::string::npos);
    CHECK(bad.out.empty());
    auto r2 = run(cli() + " prewarm --shape 8,64 --tp 8");
    CHECK(r2.code == 2);
    CHECK(r2.err.find("--tp needs --model DIR") != std::string::npos);
    r2 = run(cli() + " prewarm --shapes");
    CHECK(r2.code == 2);
    CHECK(r2.err.find("--shapes needs --model DIR") != std::string::npos);
    r2 = run(cli() + " prewarm --model " + model.str() + " --ep 0 --shapes");
    CHECK(r2.code == 2);
    CHECK(r2.err.find("--ep: expects an integer from 1 to 65536, got `0`") != std::string::npos);
    r2 = run(cli() + " prewarm --model " + model.str() + "/nowhere --shapes");
    CHECK(r2.code == 2);
    CHECK(r2.err.find("nowhere/config.json: no such file") != std::string::npos);
  }

  TEST_CASE("cache export writes only a regular file or stdout, never through a FIFO, a device or a symlink") {
    testutil::TempDir dir;
    // a few kernels (K = 48: no GEMM), so the archive holds something
    REQUIRE(run(with_cache(dir) + " prewarm --shape 16,48 --arch sm_90a --a-from quantize --in-dtype bf16 --quiet").code == 0);
    const std::string fifo = dir.str() + "/fifo";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    auto r = run(with_cache(dir) + " cache export " + fifo);
    CHECK(r.code == 2);
    CHECK(r.err.find(fifo + " is a FIFO: an archive is written only to a regular file") != std::string::npos);
    struct stat st{};
    CHECK((::lstat(fifo.c_str(), &st) == 0 && S_ISFIFO(st.st_mode)));
    // a symlink is neither followed nor replaced, whether it points at a file or at nothing
    const std::string target = dir.str() + "/target", link = dir.str() + "/link", dangling = dir.str() + "/dangling";
    { std::ofstream(target) << "keep"; }
    std::filesystem::create_symlink(target, link);
    std::filesystem::create_symlink(dir.str() + "/nothing", dangling);
    for (const std::string& l : {link, dangling}) {
      r = run(with_cache(dir) + " cache export " + l);
      CAPTURE(l);
      CHECK(r.code == 2);
      CHECK(r.err.find(l + " is a symlink") != std::string::npos);
      CHECK(std::filesystem::is_symlink(l));
    }
    CHECK(testutil::run("cat " + target).out == "keep");
    CHECK(!std::filesystem::exists(dir.path / "nothing"));
    // a device node (made where this user may: as root, a null device in the temp dir)
    const std::string device = dir.str() + "/null";
    if (::mknod(device.c_str(), S_IFCHR | 0600, makedev(1, 3)) == 0) {
      r = run(with_cache(dir) + " cache export " + device);
      CHECK(r.code == 2);
      CHECK(r.err.find(device + " is a device") != std::string::npos);
      CHECK((::lstat(device.c_str(), &st) == 0 && S_ISCHR(st.st_mode)));
    }
    // a regular file is replaced, keeping its permissions; a new one is made
    const std::string file = dir.str() + "/out.tar";
    { std::ofstream(file) << "old"; }
    ::chmod(file.c_str(), 0640);
    r = run(with_cache(dir) + " cache export " + file + " --json");
    CAPTURE(r.err);
    CHECK(r.code == 0);
    const long n = testutil::json_int(r.out, "kernels");
    const std::string listed = run(cli() + " prewarm --shape 16,48 --arch sm_90a --a-from quantize --in-dtype bf16 --list").out;
    CHECK(n == long(std::count(listed.begin(), listed.end(), '\n')));
    CHECK((::stat(file.c_str(), &st) == 0 && (st.st_mode & 0777) == 0640));
    CHECK(run("tar -tf " + file + " | grep -c cubin").out == std::to_string(n) + "\n");
    // `-`: the archive on stdout, the summary on stderr; import `-` reads it from stdin
    r = run(with_cache(dir) + " cache export - --json > " + dir.str() + "/piped.tar");
    CHECK(r.code == 0);
    CHECK(testutil::json_int(r.err, "kernels") == n);
    CHECK(run("cmp " + file + " " + dir.str() + "/piped.tar").code == 0);
    testutil::TempDir other;
    r = run("cat " + file + " | " + with_cache(other) + " cache import - --json");
    CAPTURE(r.err);
    CHECK(r.code == 0);
    CHECK(testutil::json_int(r.out, "kernels") == n);
    // import reads a regular file or stdin only
    r = run(with_cache(other) + " cache import " + fifo);
    CHECK(r.code == 1);
    CHECK(r.err.find("is a FIFO, not a regular file") != std::string::npos);
  }

  TEST_CASE("cache ls prints a sidecar's control bytes escaped; its --json parses, bytes not UTF-8 as U+FFFD") {
    testutil::TempDir dir;
    REQUIRE(run(with_cache(dir) + " prewarm --shape 16,48 --arch sm_90a --a-from quantize --in-dtype bf16 --quiet").code == 0);
    bool planted = false;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir.path / "v2"))
      if (e.path().extension() == ".json" && !planted) {
        std::ifstream in(e.path());
        std::string side((std::istreambuf_iterator<char>(in)), {});
        const size_t at = side.find("\"created\":\"");
        REQUIRE(at != std::string::npos);
        side.insert(at + 11, "\x1b[2J\x1b]0;owned\x07\r\xff");
        std::ofstream(e.path(), std::ios::trunc) << side;
        planted = true;
      }
    REQUIRE(planted);
    const auto r = run(with_cache(dir) + " cache ls");
    CHECK(r.code == 0);
    CHECK(r.out.find('\x1b') == std::string::npos);
    CHECK(r.out.find('\r') == std::string::npos);
    CHECK(r.out.find('\x07') == std::string::npos);
    CHECK(r.out.find("\\x1b[2J\\x1b]0;owned\\x07\\x0d\\xff") != std::string::npos);
    for (const char* action : {"ls", "verify"}) {
      const auto j = run(with_cache(dir) + " cache " + action + " --json");
      CAPTURE(action);
      CAPTURE(j.out);
      const auto entries = nlohmann::json::parse(j.out);  // throws (fails the case) when it is not JSON
      REQUIRE(entries.is_array());
      size_t owned = 0;
      for (const auto& e : entries) {
        CHECK(e.at("spec").is_object());
        const std::string created = e.at("created").get<std::string>();
        if (created.find("\x1b[2J\x1b]0;owned\x07\r\xef\xbf\xbd") == 0) ++owned;
      }
      CHECK(owned == 1);
    }
    for (const char* command : {" cache stats --json", " info --json"}) {
      const auto j = run(with_cache(dir) + command);
      CAPTURE(command);
      CHECK(nlohmann::json::parse(j.out).at("nvrtc").is_string());
    }
  }

  TEST_CASE("manifests are regular files of bounded size, read once, duplicate lines merged") {
    testutil::TempDir dir;
    const std::string fifo = dir.str() + "/fifo";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    // `timeout`: a manifest read that waits on the FIFO fails here instead of hanging the suite
    auto r = run("timeout 60 " + cli() + " prewarm --manifest " + fifo + " --list");
    CHECK(r.code == 2);
    CHECK(r.err.find("manifest: " + fifo + " is a FIFO, not a regular file") != std::string::npos);
    // a device: refused before a byte is read (memory bounded so a reader of /dev/zero stops)
    r = run("ulimit -v 1000000; " + cli() + " prewarm --manifest /dev/zero --list");
    CHECK(r.code == 2);
    CHECK(r.err.find("manifest: /dev/zero is a device, not a regular file") != std::string::npos);
    // a directory is an error, also beside --shape (not an empty manifest)
    r = run(cli() + " prewarm --manifest " + dir.str() + " --shape 8,64 --list");
    CHECK(r.code == 2);
    CHECK(r.err.find(dir.str() + " is a directory, not a regular file") != std::string::npos);
    // over the bound
    const std::string big = dir.str() + "/big.txt";
    { std::ofstream(big) << "w 64 64\n"; }
    std::filesystem::resize_file(big, nvfp4::jit::detail::kMaxManifestBytes + 1);
    r = run(cli() + " prewarm --manifest " + big + " --list");
    CHECK(r.code == 2);
    CHECK(r.err.find("over the limit of " + std::to_string(nvfp4::jit::detail::kMaxManifestBytes)) != std::string::npos);
    // comments only: no shapes is an error naming the file
    { std::ofstream(dir.path / "empty.txt") << "# nothing\n\n"; }
    r = run(cli() + " prewarm --manifest " + dir.str() + "/empty.txt --shape 8,64 --list");
    CHECK(r.code == 2);
    CHECK(r.err.find("empty.txt: no weight shapes") != std::string::npos);
    // 2000 copies of one line cost what one line costs
    {
      std::ofstream many(dir.path / "many.txt");
      for (int i = 0; i < 2000; ++i) many << "w" << i % 3 << " 4096 4096\n";
    }
    { std::ofstream(dir.path / "one.txt") << "w 4096 4096\n"; }
    const auto t0 = std::chrono::steady_clock::now();
    r = run(cli() + " prewarm --manifest " + dir.str() + "/many.txt --arch sm_90a --list");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(r.code == 0);
    CHECK(r.out == run(cli() + " prewarm --manifest " + dir.str() + "/one.txt --arch sm_90a --list").out);
    CHECK(seconds < 20);  // one line costs well under a second; 2000 unmerged lines took over 20 s
    // a bad line is named by file and line, its bytes escaped
    { std::ofstream(dir.path / "bad.txt") << "w 64 64\nq\x1b[2J 64\n"; }
    r = run(cli() + " prewarm --manifest " + dir.str() + "/bad.txt --list");
    CHECK(r.code == 2);
    CHECK(r.err.find("bad.txt:2: expected `<name> <N> <K> [groups] [key=value...]`, got `q\\x1b[2J 64`") != std::string::npos);
  }

  TEST_CASE("integer flags state their range; -j is 1 to 256 and never more threads than kernels") {
    auto r = run(cli() + " prewarm --shape 8,64 --list -j 100000");
    CHECK(r.code == 2);
    CHECK(r.err.find("-j: expects an integer from 1 to 256, got `100000`") != std::string::npos);
    r = run(cli() + " prewarm --shape 8,64 --list -j 2147483648");
    CHECK(r.code == 2);
    CHECK(r.err.find("-j: expects an integer from 1 to 256, got `2147483648`") != std::string::npos);
    r = run(cli() + " prewarm --shape 8,64 --list -j0");
    CHECK(r.err.find("-j: expects an integer from 1 to 256, got `0`") != std::string::npos);
    r = run(cli() + " prewarm --shape 8,64 --list --sms 5000");
    CHECK(r.err.find("--sms: expects an integer from 1 to 1024, got `5000`") != std::string::npos);
    r = run(cli() + " tune --shape 64,64 --m x");
    CHECK(r.code == 2);
    CHECK(r.err.find("--m: expects an integer from 1 to 2147483647, got `x`") != std::string::npos);
    CHECK(run(cli() + " --help prewarm").out.find("1 to 256") != std::string::npos);
    testutil::TempDir dir;
    r = run(with_cache(dir) + " prewarm --shape 16,48 --arch sm_90a --a-from quantize --in-dtype bf16 -j 256 --json");
    CAPTURE(r.err);
    CHECK(r.code == 0);
    CHECK(testutil::json_int(r.out, "threads") >= 1);
    CHECK(testutil::json_int(r.out, "threads") <= testutil::json_int(r.out, "kernels"));
  }

  TEST_CASE("a K no GEMM serves is named as the reason, with the manifest's file and line; no arch is blamed") {
    testutil::TempDir dir;
    { std::ofstream(dir.path / "k48.txt") << "# K = 48: two NVFP4 blocks short\nodd 64 48\n"; }
    const auto r = run(with_cache(dir) + " prewarm --manifest " + dir.str() + "/k48.txt --arch sm_90a --a-from quantize "
                                         "--in-dtype bf16 --json");
    CAPTURE(r.err);
    CHECK(r.code == 0);
    CHECK(r.err.find("k48.txt:2: `odd` (N = 64, K = 48): no GEMM kernels: K = 48 is not a multiple of 32, so no GEMM "
                     "kernel serves this shape") != std::string::npos);
    CHECK(r.err.find("no GEMM backend serves this arch") == std::string::npos);
    // tune says it before looking for a GPU
    const auto t = run(cli() + " tune --shape 64,48");
    CHECK(t.code == 2);
    CHECK(t.err.find("K = 48 is not a multiple of 32") != std::string::npos);
  }

  TEST_CASE("--arch with an empty name is a usage error, not the current device") {
    for (const char* archs : {",,", ",", "sm_90a,,sm_100a", "sm_90a,"}) {
      const auto r = run(cli() + " prewarm --shape 8,64 --list --arch " + archs);
      CAPTURE(archs);
      CHECK(r.code == 2);
      CHECK(r.err.find(std::string("--arch `") + archs + "`: an empty arch name") != std::string::npos);
    }
  }

  TEST_CASE("usage is checked before any GPU is looked for, on every verb") {
    for (const char* command : {" tune --shape 64,64 --runs 0", " tune --shape 64,64 --m 0", " tune --shape 64,64 --runs 99999",
                                " bench gemm --m 0", " prewarm --shape 8,64 --tp 0", " tune --shape 64,64 --frob",
                                " tune --shape 2048,7168,256 --m 600", " bench block --block llama-3.1-8b",
                                " bench block --tokens 0", " bench gemm --block deepseek-v3-moe"}) {
      const auto r = run(cli() + command);
      CAPTURE(command);
      CAPTURE(r.err);
      CHECK(r.code == 2);
    }
    CHECK(run(cli() + " tune --shape 64,64 --runs 0").err.find("--runs: expects an integer from 1 to 10000, got `0`") !=
          std::string::npos);
    CHECK(run(cli() + " tune --shape 2048,7168,256 --m 600").err.find("is tuned up to 512 rows per expert") != std::string::npos);
    const std::string block = run(cli() + " bench block --block llama-3.1-8b").err;
    CAPTURE(block);
    CHECK(block.find("--block llama-3.1-8b: one of llama-3.1-8b-mlp, deepseek-v3-moe") != std::string::npos);
    CHECK(block.find("did you mean `llama-3.1-8b-mlp`") != std::string::npos);
  }
}
