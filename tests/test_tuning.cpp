// The tuner's CPU side: the tuning table's file (round trip,
// version rejection, damaged lines, concurrent writers).
#include <sys/stat.h>
#include <tuple>
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>

#include "core/tuning_table.hpp"
#include "ops/gemm/call.hpp"
#include "ops/gemm/m_buckets.hpp"
#include "ops/gemm/tune.hpp"
#include "test_util.hpp"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;

namespace {

TuningEntry entry(int64_t n, int bucket, int split_k, double us) {
  TuningEntry e;
  GemmProblem p;
  p.n = n, p.k = 4096;
  GemmTile tile;
  tile.block_m = uint16_t(std::min(bucket, 64));  // a tile the sm_90a backend builds for every bucket
  tile.block_n = 64;
  tile.block_k = 256;
  tile.threads = 256;
  tile.stages = 4;
  tile.split_k = uint16_t(split_k);
  tile.k_slices = 1;
  e.tuned = gemm_key(gemm_spec(gemm_problem(Arch::sm_90a, p), tile));
  e.m_bucket = bucket;
  e.us = us;
  e.heuristic_us = us * 1.1;
  return e;
}

const TuningVersions kVersions{"1.2.3", "13.0", 13000};

std::string read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

TEST_SUITE("tuning") {
  TEST_CASE("table round trip; another version's table is ignored with a note; damaged lines are skipped") {
    const std::vector<TuningEntry> entries{entry(8192, 8, 2, 28.5), entry(8192, kGemmLargeM, 1, 870.25),
                                           entry(4096, 64, 4, 40)};
    const std::string text = TuningTable::to_text(entries, Arch::sm_90a, "NVIDIA H100 80GB HBM3", 132, kVersions);
    std::string note;
    const std::vector<TuningEntry> back = TuningTable::parse(text, kVersions, &note);
    CHECK(note == "");
    REQUIRE(back.size() == entries.size());
    for (size_t i = 0; i < back.size(); ++i) {
      CHECK(back[i].tuned == entries[i].tuned);
      CHECK(back[i].m_bucket == entries[i].m_bucket);
      CHECK(back[i].us == doctest::Approx(entries[i].us));
    }
    for (const TuningVersions& other : {TuningVersions{"1.2.4", "13.0", 13000}, TuningVersions{"1.2.3", "12.8", 13000},
                                        TuningVersions{"1.2.3", "13.0", 12080}}) {
      std::string why;
      CHECK(TuningTable::parse(text, other, &why).empty());
      CHECK(why.find("ignored") != std::string::npos);
    }
    std::string damaged = text;
    damaged.insert(damaged.find("\n{") + 1, "{\"op\":6,\"n\":oops},\n");
    CHECK(TuningTable::parse(damaged, kVersions, &note).size() == entries.size());
    CHECK(note.find("1 entries") != std::string::npos);
    CHECK(TuningTable::parse("garbage", kVersions, &note).empty());
    // a table of format 1 (every op's fields in one shared record) is not read
    std::string format1 = text;
    format1.replace(format1.find("\"format\":2"), 10, "\"format\":1");
    CHECK(TuningTable::parse(format1, kVersions, &note).empty());
    CHECK(note == "not a tuning table of format 2");
    CHECK(TuningTable::file_name(Arch::sm_90a, "NVIDIA H100 80GB HBM3", 132) == "sm_90a-NVIDIA_H100_80GB_HBM3-132.json");
  }

  TEST_CASE("a table below a cache root is read only where no other user could have written it") {
    testutil::TempDir dir;
    const std::string path = dir.str() + "/v2/tuning/" + TuningTable::file_name(Arch::sm_90a, "GPU", 132);
    REQUIRE(TuningTable(path, Arch::sm_90a, "GPU", 132, kVersions).record({entry(8192, 8, 2, 30)}) == "");
    REQUIRE(TuningTable(path, Arch::sm_90a, "GPU", 132, kVersions).entries().size() == 1);
    const std::string tuning = dir.str() + "/v2/tuning";
    for (const auto& [what, target, mode] : {std::tuple{"the tuning directory", tuning, 0777},
                                             std::tuple{"the v2 directory", dir.str() + "/v2", 01777},
                                             std::tuple{"the table", path, 0666}}) {
      struct stat st{};
      REQUIRE(::stat(target.c_str(), &st) == 0);
      REQUIRE(::chmod(target.c_str(), mode) == 0);
      TuningTable t(path, Arch::sm_90a, "GPU", 132, kVersions);
      CHECK_MESSAGE(t.entries().empty(), what << " writable by others (mode " << std::oct << mode << "): its entries were read");
      const auto notes = t.notes();
      CHECK_MESSAGE((!notes.empty() && notes[0].find("writable by") != std::string::npos),
                    what << ": the note does not say why: " << (notes.empty() ? std::string("(none)") : notes[0]));
      REQUIRE(::chmod(target.c_str(), st.st_mode & 07777) == 0);
    }
    CHECK(TuningTable(path, Arch::sm_90a, "GPU", 132, kVersions).entries().size() == 1);
  }

  TEST_CASE("recorded entries persist, are found by the next table, and replace older ones") {
    testutil::TempDir dir;
    const std::string path = dir.str() + "/v2/tuning/" + TuningTable::file_name(Arch::sm_90a, "GPU", 132);
    {
      TuningTable t(path, Arch::sm_90a, "GPU", 132, kVersions);
      CHECK(t.entries().empty());
      CHECK(t.record({entry(8192, 8, 2, 30), entry(8192, 16, 2, 31)}) == "");
    }
    TuningTable t(path, Arch::sm_90a, "GPU", 132, kVersions);
    const KernelSpec problem = entry(8192, 8, 1, 0).problem();
    auto split_k = [&](const TuningTable& table) { return gemm_spec_of(*table.find(problem, 8)).tile.split_k; };
    REQUIRE(t.find(problem, 8));
    CHECK(split_k(t) == 2);
    CHECK_FALSE(t.find(problem, 32));
    CHECK_FALSE(t.find(entry(4096, 8, 1, 0).problem(), 8));
    CHECK(t.record({entry(8192, 8, 4, 25)}) == "");
    CHECK(split_k(TuningTable(path, Arch::sm_90a, "GPU", 132, kVersions)) == 4);
    CHECK(TuningTable(path, Arch::sm_90a, "GPU", 132, kVersions).entries().size() == 2);
    // a table from another library version loads as empty, with a note
    TuningTable stale(path, Arch::sm_90a, "GPU", 132, TuningVersions{"9.9.9", "13.0", 13000});
    CHECK(stale.entries().empty());
    REQUIRE(stale.notes().size() == 1);
    CHECK(stale.notes()[0].find("ignored") != std::string::npos);
  }

  TEST_CASE("two processes recording into one table at once lose nothing") {
    testutil::TempDir dir;
    const std::string path = dir.str() + "/v2/tuning/t.json";
    constexpr int kPerProcess = 40;
    pid_t pids[2];
    for (int p = 0; p < 2; ++p) {
      pids[p] = ::fork();
      if (pids[p] == 0) {
        TuningTable t(path, Arch::sm_90a, "GPU", 132, kVersions);
        for (int i = 0; i < kPerProcess; ++i)
          if (!t.record({entry(1024 * (p + 1), 8 << (i % 6), 1 + i % 2, 10 + i)}).empty()) ::_exit(1);
        ::_exit(0);
      }
    }
    for (pid_t pid : pids) {
      int status = 0;
      ::waitpid(pid, &status, 0);
      CHECK(WIFEXITED(status));
      CHECK(WEXITSTATUS(status) == 0);
    }
    // each process wrote 6 distinct (problem, bucket) keys, the last value of each winning
    const TuningTable t(path, Arch::sm_90a, "GPU", 132, kVersions);
    CHECK(t.entries().size() == 12);
    CHECK(read(path).find("\"format\":2") != std::string::npos);
  }
}

namespace {

// `text` with the first `from` replaced by `to` (which must be there).
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  REQUIRE_MESSAGE(at != std::string::npos, from);
  return text.replace(at, from.size(), to);
}

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::trunc) << text; }

}  // namespace

TEST_SUITE("tuning") {
  TEST_CASE("every field of an entry is range-checked before it is narrowed, and given once") {
    const std::string text = TuningTable::to_text({entry(8192, 8, 2, 28.5)}, Arch::sm_90a, "GPU", 132, kVersions);
    std::string note;
    REQUIRE(TuningTable::parse(text, kVersions, &note).size() == 1);
    // each of these once read as another value that fits its field (op 262 as 6, block_m 65544
    // as 8, ...), or as the first of two values
    const std::pair<std::string, std::string> cases[] = {
        {R"("op":"gemm",)", R"("op":"gemx",)"},
        {R"("op":"gemm",)", R"("op":"dequantize",)"},
        {R"("block_m":8,)", R"("block_m":65544,)"},
        {R"("threads":256,)", R"("threads":65920,)"},
        {R"("groups":0,)", R"("groups":4294967296,)"},
        {R"("n":8192,)", R"("n":9223372036854775807,)"},
        {R"("n":8192,)", R"("n":18446744073709551615,)"},
        {R"("k":4096,)", R"("k":-4096,)"},
        {R"("stages":4,)", R"("stages":260,)"},
        {R"("split_k":2,)", R"("split_k":2.5,)"},
        {R"("m_bucket":8,)", R"("m_bucket":"8",)"},
        {R"("a_dtype":"bf16")", R"("a_dtype":"bf17")"},
        {R"("bias":"none")", R"("bias":"int8")"},
        {R"({"spec":{"op":"gemm",)", R"({"spec":{"n":4,"op":"gemm",)"},  // the first of two n
        {R"({"spec":{"op":"gemm",)", R"({"spec":{"op":"gemm","op":"gemm",)"},
        {R"("arch":"sm_90a","n")", R"("arch":"sm_100a","n")"},  // an sm_100a entry in an sm_90a table
        {R"("arch":"sm_90a","n")", R"("arch":"sm_99a","n")"},
        {R"(,"k_slices":1)", ""},
    };
    const char* expected[] = {
        "entries[0]: spec.op = \"gemx\" is not an op",
        "entries[0]: op dequantize has no tuned kernels",
        "entries[0]: spec.tile.block_m = 65544 is out of range (1 to 256)",
        "entries[0]: spec.tile.threads = 65920 is out of range (32 to 1024)",
        "entries[0]: spec.groups = 4294967296 is out of range (0 to 65536)",
        "entries[0]: spec.n = 9223372036854775807 is out of range (1 to 2147483647)",
        "entries[0]: spec.n = 18446744073709551615 is out of range",
        "entries[0]: spec.k = -4096 is out of range",
        "entries[0]: spec.tile.stages = 260 is out of range",
        "entries[0]: spec.tile.split_k = 2.5 is not an integer",
        "entries[0]: m_bucket = \"8\" is not an integer",
        "entries[0]: spec.a_dtype = \"bf17\" is not a dtype",
        "entries[0]: spec.bias = \"int8\" is not none, bf16 or fp32",
        "entries[0]: n is given twice",
        "entries[0]: op is given twice",
        "entries[0]: spec.arch = sm_100a in a table for sm_90a",
        "entries[0]: spec.arch = \"sm_99a\" is not an arch",
        "entries[0]: spec.tile.k_slices is missing",
    };
    for (size_t i = 0; i < std::size(cases); ++i) {
      const std::string bad = replaced(text, cases[i].first, cases[i].second);
      CAPTURE(bad);
      note.clear();
      const std::vector<TuningEntry> back = TuningTable::parse(bad, kVersions, &note);
      CHECK_MESSAGE(back.empty(), "kept: ", (back.empty() ? std::string() : back[0].tuned.describe()));
      CHECK(note.find(expected[i]) != std::string::npos);
    }
    // an entry's index is the one it has in the file; the others still load
    const std::string two = TuningTable::to_text({entry(8192, 8, 2, 28.5), entry(4096, 16, 1, 30)}, Arch::sm_90a, "GPU",
                                                 132, kVersions);
    note.clear();
    CHECK(TuningTable::parse(replaced(two, R"("n":4096,)", R"("n":0,)"), kVersions, &note).size() == 1);
    CHECK(note.find("1 entries that do not parse were skipped (the first: entries[1]: spec.n = 0 is out of range") !=
          std::string::npos);
  }

  TEST_CASE("a table whose header has a field out of range, given twice, or of another arch is not read") {
    testutil::TempDir dir;
    const std::string path = dir.str() + "/t.json";
    const std::string text = TuningTable::to_text({entry(8192, 8, 2, 28.5)}, Arch::sm_90a, "GPU", 132, kVersions);
    write(path, text);
    REQUIRE(TuningTable(path, Arch::sm_90a, "GPU", 132, kVersions).entries().size() == 1);
    const std::pair<std::string, std::string> cases[] = {
        {R"("sm_count":132,)", R"("sm_count":-5,)"},
        {R"("sm_count":132,)", R"("sm_count":4294967428,)"},
        {R"("driver":13000,)", R"("driver":13000,"driver":13000,)"},
        {R"("arch":"sm_90a",)", R"("arch":"sm_100a","arch":"sm_90a",)"},
        {R"("arch":"sm_90a",)", R"("arch":"sm_100a",)"},
    };
    const char* expected[] = {
        "header: sm_count = -5 is out of range (1 to 1024)",
        "header: sm_count = 4294967428 is out of range (1 to 1024)",
        "header: driver is given twice",
        "header: arch is given twice",
        "header: arch = \"sm_100a\" in a table for sm_90a",
    };
    for (size_t i = 0; i < std::size(cases); ++i) {
      write(path, replaced(text, cases[i].first, cases[i].second));
      const TuningTable t(path, Arch::sm_90a, "GPU", 132, kVersions);
      CAPTURE(cases[i].second);
      CHECK(t.entries().empty());
      REQUIRE(t.notes().size() == 1);
      CHECK(t.notes()[0] == path + ": " + expected[i]);
    }
  }

  TEST_CASE("cache import refuses a table named for one arch holding another's, and names the file, entry and field") {
    testutil::TempDir src, dst;
    const TuningVersions here = TuningVersions::current();  // the CLI's
    const std::string dir = src.str() + "/v2/tuning/";
    std::filesystem::create_directories(dir);
    // named for sm_100a, holding an sm_90a table
    write(dir + TuningTable::file_name(Arch::sm_100a, "GPU", 132),
          TuningTable::to_text({entry(8192, 8, 2, 28.5)}, Arch::sm_90a, "GPU", 132, here));
    // named for 132 SMs, its header saying -5
    write(dir + TuningTable::file_name(Arch::sm_90a, "GPU", 132),
          replaced(TuningTable::to_text({entry(8192, 8, 2, 28.5)}, Arch::sm_90a, "GPU", 132, here), R"("sm_count":132,)",
                   R"("sm_count":-5,)"));
    // a good table with one entry whose block_m would wrap to 16
    write(dir + TuningTable::file_name(Arch::sm_90a, "Other", 114),
          replaced(TuningTable::to_text({entry(8192, 8, 2, 28.5), entry(4096, 16, 1, 30)}, Arch::sm_90a, "Other", 114, here),
                   R"("block_m":16,)", R"("block_m":65552,)"));
    const std::string tar = src.str() + "/tables.tar";
    REQUIRE(testutil::run("tar --format=ustar -cf " + tar + " -C " + src.str() + " v2/tuning/sm_100a-GPU-132.json " +
                          "v2/tuning/sm_90a-GPU-132.json v2/tuning/sm_90a-Other-114.json")
                .code == 0);
    const auto r = testutil::run("NVFP4_JIT_CACHE_DIR=" + dst.str() + " " + testutil::cli() + " cache import " + tar + " --json");
    CAPTURE(r.out);
    CAPTURE(r.err);
    CHECK(r.code == 1);
    CHECK(testutil::json_int(r.out, "tables") == 1);
    CHECK(testutil::json_int(r.out, "skipped") == 3);
    CHECK(r.err.find("v2/tuning/sm_100a-GPU-132.json: header: arch = \"sm_90a\" in a table for sm_100a") != std::string::npos);
    CHECK(r.err.find("v2/tuning/sm_90a-GPU-132.json: header: sm_count = -5 is out of range") != std::string::npos);
    CHECK(r.err.find("v2/tuning/sm_90a-Other-114.json: entries[1]: spec.tile.block_m = 65552 is out of range") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(dst.str() + "/v2/tuning/sm_100a-GPU-132.json"));
    CHECK_FALSE(std::filesystem::exists(dst.str() + "/v2/tuning/sm_90a-GPU-132.json"));
    const TuningTable imported(dst.str() + "/v2/tuning/sm_90a-Other-114.json", Arch::sm_90a, "Other", 114);
    CHECK(imported.entries().size() == 1);
  }
}

TEST_SUITE("tuning") {
  TEST_CASE("tune rejects bad problems and options before touching a device") {
    auto status_of = [](const GemmProblem& p, const TuneOptions& o) {
      try {
        tune(p, o);
      } catch (const Error& e) {
        return e.status();
      }
      return Status::ok;
    };
    GemmProblem p;
    p.n = 256, p.k = 256;
    GemmProblem bad = p;
    bad.k = 48;  // not a multiple of 32
    CHECK(status_of(bad, {}) == Status::invalid_argument);
    bad = p;
    bad.n = 0;
    CHECK(status_of(bad, {}) == Status::invalid_argument);
    bad = p;
    bad.d_dtype = DType::nvfp4;  // a real dtype gemm cannot write
    CHECK(status_of(bad, {}) == Status::unsupported);
    CHECK(status_of(p, {0, 0}) == Status::invalid_argument);   // runs
    CHECK(status_of(p, {-1, 5}) == Status::invalid_argument);  // m
    // grouped: an expert count in range, contiguous or masked, at most 512 rows per expert
    GemmProblem grouped = p;
    grouped.groups = -1;
    CHECK_THROWS_WITH_AS(tune(grouped), doctest::Contains("groups = -1 must be 1 to 65536"), Error);
    grouped.groups = 8, grouped.grouped_layout = GroupedLayout::batched;
    CHECK_THROWS_WITH_AS(tune(grouped), doctest::Contains("grouped_layout = 3 is not contiguous or masked"), Error);
    grouped.grouped_layout = GroupedLayout::masked;
    CHECK_THROWS_WITH_AS(tune(grouped, {513, 5}), doctest::Contains("m = 513 rows per expert is more than the 512"), Error);
  }

  TEST_CASE("a grouped bucket is timed on the heaviest routing it serves, and the decode bucket on one token's rows too") {
    // The rows the default expected_m sends to a bucket of m: up to 4.8 rows an expert for 8 (from
    // 6 rows the default is 16), 13.6 for 16, and past 128 rows mean + 2.5 sqrt(mean) <= m.
    CHECK(grouped_rows_for_expected_m(128, 1) == 204);
    CHECK(grouped_rows_for_expected_m(256, 8) == 1228);
    CHECK(grouped_rows_for_expected_m(256, 16) == 3481);
    CHECK(grouped_rows_for_expected_m(256, 296) == 65536);  // 256 + 2.5 x 16 = 296: DeepSeek-V3 at 8192 tokens
    CHECK(grouped_rows_for_expected_m(128, 512) / 128 == 458);

    std::mt19937_64 rng(std::random_device{}());
    auto total = [](const std::vector<int32_t>& c) { return std::accumulate(c.begin(), c.end(), int64_t(0)); };
    constexpr int64_t kMaxRows = 32768;
    for (const auto [groups, m] : {std::pair{128, 1}, {256, 8}, {6, 8}, {256, 16}, {256, 296}, {128, 512}}) {
      CAPTURE(groups);
      CAPTURE(m);
      const auto routings = grouped_tuning_routings(groups, m, kMaxRows, rng);
      REQUIRE(routings.size() == (m <= kTunedOneTokenM ? 2u : 1u));
      for (const auto& counts : routings) {
        REQUIRE(counts.size() == size_t(groups));
        CHECK(*std::min_element(counts.begin(), counts.end()) >= 0);
      }
      const int64_t heaviest = grouped_rows_for_expected_m(groups, m);
      CHECK(grouped_default_expected_m(heaviest, groups) <= m);
      CHECK(grouped_default_expected_m(heaviest + 1, groups) > m);
      const auto& uniform = routings[0];
      const int64_t experts = std::count_if(uniform.begin(), uniform.end(), [](int32_t c) { return c > 0; });
      if (heaviest <= kMaxRows) {
        CHECK(total(uniform) == heaviest);
      } else {  // the bucket's rows an expert, on as many experts as the scratch rows hold
        CHECK(total(uniform) <= kMaxRows);
        CHECK(total(uniform) > kMaxRows - heaviest / groups);
        CHECK(experts == kMaxRows * groups / heaviest);
        CHECK(uniform.front() > 0);  // spread from the first expert on
      }
      if (routings.size() == 2) {  // one row in each of min(groups, 8) distinct experts
        const auto& one = routings[1];
        CHECK(total(one) == std::min(groups, kTunedOneTokenExperts));
        CHECK(*std::max_element(one.begin(), one.end()) == 1);
        CHECK(one.front() == 1);  // spread from the first expert on
      }
    }
  }
}
