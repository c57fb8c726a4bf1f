#include "core/nvrtc_compiler.hpp"

#include <nvrtc.h>

#include <algorithm>
#include <memory>

#include "core/error.hpp"
#include "core/embedded.hpp"

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
  if (result != NVRTC_SUCCESS) fail(Status::compile_failed, "NVRTC {} failed: {}", what, nvrtcGetErrorString(result));
}

struct ProgramDeleter {
  void operator()(nvrtcProgram* program) const {
    nvrtcDestroyProgram(program);
    delete program;
  }
};

}  // namespace

const std::string& nvrtc_version() {
  static const std::string version = [] {
    int major = 0, minor = 0;
    check(nvrtcVersion(&major, &minor), "version query");
    return std::to_string(major) + "." + std::to_string(minor);
  }();
  return version;
}

bool nvrtc_supports(Arch arch) {
  static const std::vector<int> archs = [] {
    int count = 0;
    check(nvrtcGetNumSupportedArchs(&count), "arch query");
    std::vector<int> list(count);
    check(nvrtcGetSupportedArchs(list.data()), "arch query");
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
  check(nvrtcCreateProgram(program.get(), kernel.source.c_str(), (kernel.name + ".cu").c_str(),
                           static_cast<int>(header_names.size()), header_sources.data(), header_names.data()),
        "program creation");

  const std::vector<std::string> options = nvrtc_options(arch);
  std::vector<const char*> option_ptrs;
  for (const std::string& option : options) option_ptrs.push_back(option.c_str());
  const nvrtcResult result = nvrtcCompileProgram(*program, static_cast<int>(option_ptrs.size()), option_ptrs.data());
  if (result != NVRTC_SUCCESS) {
    size_t log_size = 0;
    nvrtcGetProgramLogSize(*program, &log_size);
    std::string log(log_size, '\0');
    if (log_size) nvrtcGetProgramLog(*program, log.data());
    fail(Status::compile_failed, "NVRTC {} could not compile kernel {} for {}: {}\n{}", nvrtc_version(), kernel.name,
         to_string(arch), nvrtcGetErrorString(result), log);
  }
  size_t size = 0;
  check(nvrtcGetCUBINSize(*program, &size), "CUBIN size query");
  std::vector<char> cubin(size);
  check(nvrtcGetCUBIN(*program, cubin.data()), "CUBIN retrieval");
  return cubin;
}

}  // namespace nvfp4::jit::detail
