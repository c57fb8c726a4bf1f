#include "core/nvrtc_library.hpp"

#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "core/error.hpp"

namespace nvfp4::jit::detail {

namespace fs = std::filesystem;

namespace {

constexpr const char* kSonames[] = {"libnvrtc.so.13", "libnvrtc.so.12"};
// Where the nvidia-cuda-nvrtc wheels put the library, below site-packages: CUDA 13's wheel
// (nvidia-cuda-nvrtc 13.x) and CUDA 12's (nvidia-cuda-nvrtc-cu12).
constexpr const char* kWheelPaths[] = {"nvidia/cu13/lib/libnvrtc.so.13", "nvidia/cuda_nvrtc/lib/libnvrtc.so.12"};
constexpr int kWheelLevelsUp = 3;

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

// Resolves every function into `api`; returns the first missing one's name ("" when none is).
std::string resolve(void* handle, Nvrtc* api) {
#define NVFP4_RESOLVE(name)                                                  \
  api->name = reinterpret_cast<decltype(api->name)>(::dlsym(handle, #name)); \
  if (!api->name) return #name;
  NVFP4_NVRTC_FUNCTIONS(NVFP4_RESOLVE)
#undef NVFP4_RESOLVE
  return {};
}

NvrtcOpened open_with_dlopen(const NvrtcCandidate& candidate) {
  const bool by_path = candidate.name.find('/') != std::string::npos;
  // Absent files are not errors (but a path the user named must load).
  if (by_path && candidate.source != NvrtcSource::env && ::access(candidate.name.c_str(), F_OK) != 0) return {};
  const int mode = RTLD_NOW | RTLD_LOCAL | (candidate.source == NvrtcSource::process ? RTLD_NOLOAD : 0);
  void* handle = ::dlopen(candidate.name.c_str(), mode);
  if (!handle) {
    const char* why = ::dlerror();
    // Nothing loaded under that soname, or none on the loader's path: nothing there.
    if (!by_path) return {};
    return {nullptr, why ? why : "dlopen failed"};
  }
  Nvrtc api;
  if (const std::string missing = resolve(handle, &api); !missing.empty()) {
    ::dlclose(handle);
    return {nullptr, "not an NVRTC this library can use: it lacks " + missing};
  }
  return {handle, {}};
}

std::string loaded_path(void* handle, const std::string& fallback) {
  link_map* map = nullptr;
  if (::dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name) return map->l_name;
  return fallback;
}

// NVRTC dlopens libnvrtc-builtins.so.<major>.<minor> by soname. A wheel's libnvrtc finds it
// beside itself (RPATH $ORIGIN), a toolkit's has no RPATH and needs the loader's path (ldconfig,
// LD_LIBRARY_PATH). Loading the one beside it first lets that dlopen find it by soname anywhere.
void preload_builtins(const std::string& nvrtc_path, int major, int minor) {
  const std::string name = fmt::format("libnvrtc-builtins.so.{}.{}", major, minor);
  std::error_code ec;
  const fs::path real = fs::canonical(nvrtc_path, ec);
  for (const fs::path& dir : {fs::path(nvrtc_path).parent_path(), ec ? fs::path() : real.parent_path()}) {
    if (dir.empty()) continue;
    const std::string file = (dir / name).string();
    if (::access(file.c_str(), F_OK) == 0 && ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL)) return;
  }
}

NvrtcLoaded load() {
  NvrtcLoaded loaded;
  const NvrtcChoice choice =
      choose_nvrtc(nvrtc_candidates({env(kNvrtcEnv), this_binary_dir(), env("CUDA_HOME")}), open_with_dlopen);
  if (!choice.handle) {
    loaded.error = choice.error;
    return loaded;
  }
  const std::string path = loaded_path(choice.handle, choice.candidate.name);
  resolve(choice.handle, &loaded.api);  // cannot fail: the opener checked every function
  int major = 0, minor = 0;
  if (const nvrtcResult r = loaded.api.nvrtcVersion(&major, &minor); r != NVRTC_SUCCESS) {
    loaded.error = fmt::format("{} ({}) does not report its version: {}", path, describe(choice.candidate.source),
                               loaded.api.nvrtcGetErrorString(r));
    return loaded;
  }
  preload_builtins(path, major, minor);
  loaded.path = path;
  loaded.source = choice.candidate.source;
  loaded.version = std::to_string(major) + "." + std::to_string(minor);
  return loaded;
}

}  // namespace

const char* to_string(NvrtcSource source) {
  switch (source) {
    case NvrtcSource::env: return "env";
    case NvrtcSource::process: return "process";
    case NvrtcSource::wheel: return "wheel";
    case NvrtcSource::system: return "system";
  }
  return "?";
}

const char* describe(NvrtcSource source) {
  switch (source) {
    case NvrtcSource::env: return "NVFP4_JIT_NVRTC";
    case NvrtcSource::process: return "already loaded in the process";
    case NvrtcSource::wheel: return "the nvidia-cuda-nvrtc wheel beside the library";
    case NvrtcSource::system: return "the system CUDA";
  }
  return "?";
}

std::vector<NvrtcCandidate> nvrtc_candidates(const NvrtcSearchInputs& in) {
  std::vector<NvrtcCandidate> out;
  if (!in.env_value.empty()) out.push_back({in.env_value, NvrtcSource::env});
  for (const char* soname : kSonames) out.push_back({soname, NvrtcSource::process});
  if (!in.binary_dir.empty()) {
    fs::path dir = fs::path(in.binary_dir).lexically_normal();
    for (int level = 0; level <= kWheelLevelsUp; ++level) {
      for (const char* rel : kWheelPaths) out.push_back({(dir / rel).string(), NvrtcSource::wheel});
      if (!dir.has_relative_path()) break;  // at the root
      dir = dir.parent_path();
    }
  }
  std::vector<std::string> lib_dirs;
  if (!in.cuda_home.empty()) lib_dirs.push_back((fs::path(in.cuda_home) / "lib64").string());
  lib_dirs.push_back("/usr/local/cuda/lib64");
  for (const std::string& dir : lib_dirs)
    for (const char* soname : kSonames) out.push_back({(fs::path(dir) / soname).string(), NvrtcSource::system});
  for (const char* soname : kSonames) out.push_back({soname, NvrtcSource::system});
  return out;
}

NvrtcChoice choose_nvrtc(const std::vector<NvrtcCandidate>& candidates, const NvrtcOpener& open) {
  NvrtcChoice choice;
  std::string looked;
  for (const NvrtcCandidate& c : candidates) {
    NvrtcOpened opened = open(c);
    if (opened.handle) {
      choice.handle = opened.handle;
      choice.candidate = c;
      return choice;
    }
    if (c.source == NvrtcSource::env) {
      choice.error = fmt::format("{}={} cannot be loaded: {} (unset it to search for NVRTC, or point it at a "
                                 "libnvrtc.so.13)",
                                 kNvrtcEnv, c.name, opened.error.empty() ? "no such file" : opened.error);
      return choice;
    }
    const bool soname = c.name.find('/') == std::string::npos;
    looked += fmt::format("\n  {}{}{}", c.source == NvrtcSource::process ? "loaded in the process: " : soname ? "the loader's search: " : "",
                          c.name, opened.error.empty() ? "" : " (" + opened.error + ")");
  }
  choice.error = fmt::format(
      "no NVRTC found, so no kernel can be compiled ({} is unset). Looked at:{}\nSet {} to a libnvrtc.so.13: "
      "`pip install nvidia-cuda-nvrtc` puts one in site-packages/nvidia/cu13/lib/, a CUDA toolkit in lib64/",
      kNvrtcEnv, looked, kNvrtcEnv);
  return choice;
}

const NvrtcLoaded& nvrtc_loaded() {
  static const NvrtcLoaded loaded = load();
  return loaded;
}

const Nvrtc& nvrtc() {
  const NvrtcLoaded& loaded = nvrtc_loaded();
  if (!loaded.error.empty()) fail(Status::compile_failed, "{}", loaded.error);
  return loaded.api;
}

std::string this_binary_dir() {
  Dl_info info{};
  link_map* map = nullptr;
  if (::dladdr1(reinterpret_cast<void*>(&this_binary_dir), &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) == 0)
    return {};
  // The executable's own link map has an empty name.
  const std::string file = map && map->l_name && *map->l_name ? map->l_name : "/proc/self/exe";
  std::error_code ec;
  const fs::path resolved = fs::canonical(file, ec);
  if (ec) return file == "/proc/self/exe" ? std::string{} : fs::path(file).parent_path().string();
  return resolved.parent_path().string();
}

}  // namespace nvfp4::jit::detail
