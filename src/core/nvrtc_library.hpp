// NVRTC, loaded with dlopen at first use (never at library load), from the first of these that
// loads:
//   1. env      NVFP4_JIT_NVRTC, a path to a libnvrtc.so (if set and it does not load: an error,
//               no fallback);
//   2. process  an NVRTC already loaded in the process (torch's), libnvrtc.so.13 then .12;
//   3. wheel    the nvidia-cuda-nvrtc wheel near the binary holding this code: up to 3
//               directories above it, nvidia/cu13/lib/libnvrtc.so.13 (CUDA 13) then
//               nvidia/cuda_nvrtc/lib/libnvrtc.so.12 (CUDA 12);
//   4. system   $CUDA_HOME/lib64, /usr/local/cuda/lib64, then the loader's search by soname.
// So a process and the prewarm that fills its cache compile with one NVRTC when they share an
// environment, and every tool says which one it uses (nvfp4-jit info, cache stats).
#pragma once
#include <nvrtc.h>

#include <functional>
#include <string>
#include <vector>

namespace nvfp4::jit::detail {

struct Nvrtc {
#define NVFP4_NVRTC_FUNCTIONS(X)                                                                      \
  X(nvrtcVersion) X(nvrtcGetErrorString) X(nvrtcGetNumSupportedArchs) X(nvrtcGetSupportedArchs)       \
  X(nvrtcCreateProgram) X(nvrtcDestroyProgram) X(nvrtcCompileProgram) X(nvrtcGetProgramLogSize)       \
  X(nvrtcGetProgramLog) X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN)
#define NVFP4_DECLARE(name) decltype(&::name) name = nullptr;
  NVFP4_NVRTC_FUNCTIONS(NVFP4_DECLARE)
#undef NVFP4_DECLARE
};

// The steps of the search, in order.
enum class NvrtcSource { env, process, wheel, system };
// "env", "process", "wheel", "system": the names nvfp4-jit info and the APIs report.
const char* to_string(NvrtcSource source);
// The step in words, for messages ("NVFP4_JIT_NVRTC", "already loaded in the process", ...).
const char* describe(NvrtcSource source);

// The variable that names the NVRTC to use.
inline constexpr const char* kNvrtcEnv = "NVFP4_JIT_NVRTC";

struct NvrtcCandidate {
  std::string name;  // a path; a soname for `process` (RTLD_NOLOAD) and the loader's search
  NvrtcSource source;
};

// What the search starts from.
struct NvrtcSearchInputs {
  std::string env_value;   // NVFP4_JIT_NVRTC ("" when unset)
  std::string binary_dir;  // the directory of the library or executable holding this code
  std::string cuda_home;   // $CUDA_HOME ("" when unset)
};
// Every place looked at, in order.
std::vector<NvrtcCandidate> nvrtc_candidates(const NvrtcSearchInputs& inputs);

// Opening one candidate: a handle, or null with why not ("" when there is nothing at that name).
struct NvrtcOpened {
  void* handle = nullptr;
  std::string error;
};
using NvrtcOpener = std::function<NvrtcOpened(const NvrtcCandidate&)>;

struct NvrtcChoice {
  void* handle = nullptr;  // null: none loaded, and `error` says why
  NvrtcCandidate candidate;
  std::string error;
};
// The first candidate `open` loads. A failing `env` candidate ends the search with an error
// naming the variable; none loading is an error listing every place looked at.
NvrtcChoice choose_nvrtc(const std::vector<NvrtcCandidate>& candidates, const NvrtcOpener& open);

// The NVRTC this process uses, as found.
struct NvrtcLoaded {
  Nvrtc api;
  std::string path;     // the loaded file (the loader's name for it)
  std::string version;  // "13.0": nvrtcVersion's major.minor, part of every cache key
  NvrtcSource source = NvrtcSource::system;
  std::string error;    // empty when loaded
};
// Searches once, at the first call; never throws.
const NvrtcLoaded& nvrtc_loaded();
// The loaded NVRTC's functions. Throws Error(compile_failed) with the search's error when there is none.
const Nvrtc& nvrtc();

// The directory of the binary holding this code (the shared library, or the executable that
// links the objects), "" when unknown.
std::string this_binary_dir();

}  // namespace nvfp4::jit::detail
