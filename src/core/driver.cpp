#include "core/driver.hpp"

#include <dlfcn.h>

#include <mutex>

#include "core/error.hpp"

namespace nvfp4::jit::detail {

namespace {

struct Loaded {
  Driver driver;
  std::string error;  // empty when loaded
};

// Driver entry points are looked up by their base name at the CUDA version we were built
// against, the way the runtime does, so cuda.h's _v2/_v3 renames are resolved correctly.
Loaded load_driver() {
  Loaded loaded;
  void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    loaded.error = "libcuda.so.1 could not be loaded (no NVIDIA driver on this machine?)";
    return loaded;
  }
  using GetProc = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
  auto get_proc = reinterpret_cast<GetProc>(::dlsym(lib, "cuGetProcAddress_v2"));
  if (!get_proc) {
    loaded.error = "the NVIDIA driver is too old (no cuGetProcAddress_v2); CUDA 12.0 or newer is needed";
    return loaded;
  }
  Driver& d = loaded.driver;
#define NVFP4_RESOLVE(name)                                                                                 \
  {                                                                                                         \
    void* fn = nullptr;                                                                                     \
    CUdriverProcAddressQueryResult status{};                                                                \
    if (get_proc(#name, &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS || !fn) { \
      loaded.error = "the NVIDIA driver lacks " #name;                                                      \
      return loaded;                                                                                        \
    }                                                                                                       \
    d.name = reinterpret_cast<decltype(d.name)>(fn);                                                        \
  }
  NVFP4_DRIVER_FUNCTIONS(NVFP4_RESOLVE)
#undef NVFP4_RESOLVE
  if (const CUresult r = d.cuInit(0); r != CUDA_SUCCESS) {
    const char* name = nullptr;
    d.cuGetErrorName(r, &name);
    loaded.error = std::string("cuInit failed: ") + (name ? name : "unknown error");
  }
  return loaded;
}

const Loaded& loaded_driver() {
  static const Loaded loaded = load_driver();
  return loaded;
}

}  // namespace

bool driver_available(std::string* why) {
  const Loaded& loaded = loaded_driver();
  if (why) *why = loaded.error;
  return loaded.error.empty();
}

const Driver& driver() {
  const Loaded& loaded = loaded_driver();
  if (!loaded.error.empty()) fail(Status::cuda_error, "CUDA driver unavailable: {}", loaded.error);
  return loaded.driver;
}

void check_cu(CUresult result, const char* what) {
  if (result == CUDA_SUCCESS) return;
  const char* name = nullptr;
  const char* text = nullptr;
  driver().cuGetErrorName(result, &name);
  driver().cuGetErrorString(result, &text);
  fail(Status::cuda_error, "{} failed: {} ({})", what, name ? name : "?", text ? text : "?");
}

}  // namespace nvfp4::jit::detail
