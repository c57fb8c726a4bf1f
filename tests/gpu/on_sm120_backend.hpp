// The sm_120a GEMM suites' guard: their cases run on this backend, natively on sm_120a / sm_121a,
// or on sm_90a through the emulation switch (NVFP4_JIT_EMULATE_ARCH=sm_120a, set for the
// guard's lifetime only).
#pragma once
#include <doctest/doctest.h>

#include <cstdlib>

#include "core/launcher.hpp"
#include "ops/gemm/backend.hpp"

namespace nvfp4::jit::detail::test {

// ready(): false (and says why) where neither is possible.
class OnSm120Backend {
 public:
  OnSm120Backend() {
    const Arch arch = current_device().arch;
    native_ = arch == Arch::sm_120a || arch == Arch::sm_121a;
    emulated_ = arch == Arch::sm_90a;
    if (emulated_) ::setenv("NVFP4_JIT_EMULATE_ARCH", "sm_120a", 1);
  }
  ~OnSm120Backend() {
    if (emulated_) ::unsetenv("NVFP4_JIT_EMULATE_ARCH");
  }
  bool ready() const {
    if (!native_ && !emulated_) {
      MESSAGE("skipped: the sm_120a GEMM runs natively on sm_120a / sm_121a and emulated on sm_90a only");
      return false;
    }
    const GemmBackend* backend = find_gemm_backend(current_device().arch);
    REQUIRE(backend);
    REQUIRE(backend->name() == "sm120");
    return true;
  }

 private:
  bool native_ = false, emulated_ = false;
};

}  // namespace nvfp4::jit::detail::test
