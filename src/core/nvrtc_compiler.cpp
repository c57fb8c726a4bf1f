#include "core/nvrtc_compiler.hpp"

#include <algorithm>
#include <memory>

#include "core/error.hpp"
#include "core/embedded.hpp"
#include "core/nvrtc_library.hpp"

namespace nvfp4::jit::detail {

namespace {

int arch_number(Arch arch) {
  switch (arch) {
    case Arch::sm_90a: return 90;
    case Arch::sm_100a: return 100;
    case Arch::sm_103a: return 103;
    case Arch::sm_120a: return 120;
    case Arch::sm_121a: return 121;
  }
  return 0;
}

void check(nvrtcResult result, const char* what) {
  if (result != NVRTC_SUCCESS) fail(Status::compile_failed, "NVRTC {} failed: {}", what, nvrtc().nvrtcGetErrorString(result));
}

struct ProgramDeleter {
  void operator()(nvrtcProgram* program) const {
    nvrtc().nvrtcDestroyProgram(program);
    delete program;
  }
};

}  // namespace

const std::string& nvrtc_version() {
  nvrtc();  // throws when there is none
  return nvrtc_loaded().version;
}

bool nvrtc_supports(Arch arch) {
  static const std::vector<int> archs = [] {
    int count = 0;
    check(nvrtc().nvrtcGetNumSupportedArchs(&count), "arch query");
    std::vector<int> list(count);
    check(nvrtc().nvrtcGetSupportedArchs(list.data()), "arch query");
    return list;
  }();
  return std::find(archs.begin(), archs.end(), arch_number(arch)) != archs.end();
}

std::vector<std::string> nvrtc_options(Arch arch) {
  // No fast-math and denormals kept: every kernel must round exactly as the CPU reference
  // does, and the E2M1 decode relies on fp32 denormals.
  return {fmt::format("--gpu-architecture=sm_{}a", arch_number(arch)), "--std=c++17", "--fmad=true", "--ftz=false",
          "--prec-div=true", "--prec-sqrt=true", "--extra-device-vectorization"};
}

std::vector<char> nvrtc_compile(const GeneratedKernel& kernel, Arch arch) {
  if (!nvrtc_supports(arch))
    fail(Status::unsupported, "NVRTC {} cannot target {} (kernel {})", nvrtc_version(), to_string(arch), kernel.name);

  std::vector<const char*> header_names, header_sources;
  for (const EmbeddedFile& file : embedded_templates()) {
    header_names.push_back(file.name);
    header_sources.push_back(file.data);
  }
  std::unique_ptr<nvrtcProgram, ProgramDeleter> program(new nvrtcProgram{});
  check(nvrtc().nvrtcCreateProgram(program.get(), kernel.source.c_str(), (kernel.name + ".cu").c_str(),
                           static_cast<int>(header_names.size()), header_sources.data(), header_names.data()),
        "program creation");

  const std::vector<std::string> options = nvrtc_options(arch);
  std::vector<const char*> option_ptrs;
  for (const std::string& option : options) option_ptrs.push_back(option.c_str());
  const nvrtcResult result = nvrtc().nvrtcCompileProgram(*program, static_cast<int>(option_ptrs.size()), option_ptrs.data());
  if (result != NVRTC_SUCCESS) {
    size_t log_size = 0;
    nvrtc().nvrtcGetProgramLogSize(*program, &log_size);
    std::string log(log_size, '\0');
    if (log_size) nvrtc().nvrtcGetProgramLog(*program, log.data());
    fail(Status::compile_failed, "NVRTC {} could not compile kernel {} for {}: {}\n{}", nvrtc_version(), kernel.name,
         to_string(arch), nvrtc().nvrtcGetErrorString(result), log);
  }
  size_t size = 0;
  check(nvrtc().nvrtcGetCUBINSize(*program, &size), "CUBIN size query");
  std::vector<char> cubin(size);
  check(nvrtc().nvrtcGetCUBIN(*program, cubin.data()), "CUBIN retrieval");
  return cubin;
}

}  // namespace nvfp4::jit::detail
