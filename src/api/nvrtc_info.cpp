#include "core/nvrtc_library.hpp"
#include "nvfp4/jit.hpp"

nvfp4::jit::NvrtcInfo nvfp4::jit::nvrtc_info() {
  const detail::NvrtcLoaded& loaded = detail::nvrtc_loaded();
  if (!loaded.error.empty()) return {{}, {}, {}, loaded.error};
  return {loaded.path, loaded.version, detail::to_string(loaded.source), {}};
}
