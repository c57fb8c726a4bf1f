// The Blackwell GEMM suites' guard: their cases run on one backend, natively on its archs, or on
// sm_90a through the emulation switch (NVFP4_JIT_EMULATE_ARCH, set for the guard's lifetime
// only): OnSm120Backend (sm_120a / sm_121a), OnSm100Backend (sm_100a / sm_103a).
#pragma once
#include <doctest/doctest.h>

#include <cstdlib>
#include <initializer_list>
#include <string>

#include "core/launcher.hpp"
#include "ops/gemm/backend.hpp"

namespace nvfp4::jit::detail::test {

// ready(): false (and says why) where neither is possible.
class OnBlackwellBackend {
 public:
  OnBlackwellBackend(const char* backend, const char* emulated_arch, std::initializer_list<Arch> native)
      : backend_(backend), emulated_arch_(emulated_arch) {
    const Arch arch = current_device().arch;
    for (Arch a : native) native_ = native_ || arch == a;
    emulated_ = arch == Arch::sm_90a;
    if (emulated_) ::setenv("NVFP4_JIT_EMULATE_ARCH", emulated_arch, 1);
  }
  ~OnBlackwellBackend() {
    if (emulated_) ::unsetenv("NVFP4_JIT_EMULATE_ARCH");
  }
  OnBlackwellBackend(const OnBlackwellBackend&) = delete;
  OnBlackwellBackend& operator=(const OnBlackwellBackend&) = delete;
  bool ready() const {
    if (!native_ && !emulated_) {
      MESSAGE("skipped: the " << emulated_arch_ << " GEMM runs natively on its archs and emulated on sm_90a only");
      return false;
    }
    const GemmBackend* backend = find_gemm_backend(current_device().arch);
    REQUIRE(backend);
    REQUIRE(backend->name() == backend_);
    return true;
  }
  bool emulated() const { return emulated_; }

 private:
  std::string backend_, emulated_arch_;
  bool native_ = false, emulated_ = false;
};

struct OnSm120Backend : OnBlackwellBackend {
  OnSm120Backend() : OnBlackwellBackend("sm120", "sm_120a", {Arch::sm_120a, Arch::sm_121a}) {}
};
struct OnSm100Backend : OnBlackwellBackend {
  OnSm100Backend() : OnBlackwellBackend("sm100", "sm_100a", {Arch::sm_100a, Arch::sm_103a}) {}
};

}  // namespace nvfp4::jit::detail::test
