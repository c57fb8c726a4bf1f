#include "nvfp4/jit.hpp"

const char* nvfp4::jit::version() noexcept { return NVFP4_JIT_VERSION; }
