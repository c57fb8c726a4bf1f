// The generated CUDA sources of a prewarm's kernels: every built-in manifest's and two dense
// shapes', on every arch and in the Blackwell GEMMs' emulation on sm_90a, generated without
// compiling. Each is deterministic, names its spec on its first line and defines its entry
// point; specs sharing an entry point's name share its source.
//
// With NVFP4_JIT_DUMP_SOURCES_DIR set, the sources are also written there, one file an entry
// point at <dir>/<arch>[-emulating-<arch>]/<entry point>.cu, so a refactor that must leave the
// kernels as they are can be checked by `diff -r` of the dumps before and after.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "core/codegen.hpp"
#include "core/manifest.hpp"
#include "core/op_registry.hpp"
#include "core/prewarm.hpp"

using namespace nvfp4::jit;
using namespace nvfp4::jit::detail;

namespace {

std::vector<WeightShape> dumped_shapes() {
  std::vector<WeightShape> shapes;
  for (const std::string& name : builtin_manifest_names())
    for (WeightShape& s : load_manifest(name)) shapes.push_back(std::move(s));
  for (const char* dense : {"4096,4096", "7168,2048"}) shapes.push_back(parse_shape(dense));
  return shapes;
}

// Sets NVFP4_JIT_EMULATE_ARCH for the scope (none: unset), restoring what was there.
class EmulateArch {
 public:
  explicit EmulateArch(const char* arch) {
    if (const char* v = std::getenv(kVar)) saved_ = v, had_ = true;
    if (arch)
      ::setenv(kVar, arch, 1);
    else
      ::unsetenv(kVar);
  }
  ~EmulateArch() {
    if (had_)
      ::setenv(kVar, saved_.c_str(), 1);
    else
      ::unsetenv(kVar);
  }

 private:
  static constexpr const char* kVar = "NVFP4_JIT_EMULATE_ARCH";
  std::string saved_;
  bool had_ = false;
};

}  // namespace

TEST_SUITE("generated_sources") {
  TEST_CASE("every prewarmed kernel's source: deterministic, its spec and entry point named; dumped on request") {
    const std::vector<WeightShape> shapes = dumped_shapes();
    const char* dump = std::getenv("NVFP4_JIT_DUMP_SOURCES_DIR");
    struct Run {
      Arch arch;
      const char* emulated;  // NVFP4_JIT_EMULATE_ARCH, or null
    };
    std::vector<Run> runs;
    for (Arch arch : kAllArchs) runs.push_back({arch, nullptr});
    runs.push_back({Arch::sm_90a, "sm_100a"});
    runs.push_back({Arch::sm_90a, "sm_120a"});
    for (const Run& run : runs) {
      const EmulateArch emulate(run.emulated);
      const std::string label = std::string(to_string(run.arch)) + (run.emulated ? std::string("-emulating-") + run.emulated : "");
      CAPTURE(label);
      const std::vector<KernelSpec> specs = prewarm_specs(shapes, {run.arch});
      REQUIRE(!specs.empty());
      std::map<std::string, std::string> by_name;  // entry point -> source
      size_t gemms = 0, emulations = 0;
      for (const KernelSpec& spec : specs) {
        CAPTURE(spec.describe());
        const GeneratedKernel g = generate(spec);
        REQUIRE(!g.name.empty());
        CHECK(g.source == generate(spec).source);
        CHECK(g.source.rfind("// nvfp4-jit generated: " + spec.describe() + "\n", 0) == 0);
        CHECK(g.source.find(" " + g.name + "(const __grid_constant__ ") != std::string::npos);
        CHECK(op_kernels(spec.op).kernel_name(spec) == g.name);
        gemms += spec.op == Op::gemm;
        emulations += g.name.find("emu_") != std::string::npos;
        const auto [it, inserted] = by_name.emplace(g.name, g.source);
        if (!inserted) CHECK_MESSAGE(it->second == g.source, "two sources for entry point " << g.name);
        if (dump) {
          const std::filesystem::path dir = std::filesystem::path(dump) / label;
          std::filesystem::create_directories(dir);
          std::ofstream out(dir / (g.name + ".cu"), std::ios::binary);
          out << g.source;
          REQUIRE_MESSAGE(out.good(), "cannot write " << (dir / (g.name + ".cu")).string());
        }
      }
      CHECK(gemms > 0);
      // the Blackwell GEMMs' emulation takes sm_90a's GEMMs; with none asked for, sm_90a's own run them
      CHECK(emulations == (run.emulated ? gemms : 0));
    }
  }
}
