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

// Each entry point is resolved by the exact symbol cuda.h's macros name for it (cuMemAlloc ->
// cuMemAlloc_v2, ...), so the pointer always has the signature it is declared with. (Asking
// cuGetProcAddress for the base name at CUDA_VERSION can return a newer variant with another
// signature, as cuCtxGetDevice -> cuCtxGetDevice_v2 in CUDA 13.)
#define NVFP4_SYMBOL_NAME(x) NVFP4_SYMBOL_NAME2(x)
#define NVFP4_SYMBOL_NAME2(x) #x
Loaded load_driver() {
  Loaded loaded;
  void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    loaded.error = "libcuda.so.1 could not be loaded (no NVIDIA driver on this machine?)";
    return loaded;
  }
  Driver& d = loaded.driver;
#define NVFP4_RESOLVE(name)                                                                     \
  d.name = reinterpret_cast<decltype(d.name)>(::dlsym(lib, NVFP4_SYMBOL_NAME(name)));          \
  if (!d.name) {                                                                                \
    loaded.error = "the NVIDIA driver is too old: it lacks " NVFP4_SYMBOL_NAME(name);           \
    return loaded;                                                                              \
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
  if (!loaded.error.empty()) fail(Status::no_device, "CUDA driver unavailable: {}", loaded.error);
  return loaded.driver;
}

void check_cu(CUresult result, const char* what) {
  if (result == CUDA_SUCCESS) return;
  const char* name = nullptr;
  const char* text = nullptr;
  driver().cuGetErrorName(result, &name);
  driver().cuGetErrorString(result, &text);
  fail(result == CUDA_ERROR_NO_DEVICE ? Status::no_device : Status::cuda_error, "{} failed: {} ({})", what, name ? name : "?", text ? text : "?");
}

}  // namespace nvfp4::jit::detail
