// GPU tests: run on a machine with a supported GPU; elsewhere exit 77, which CTest reports
// as skipped (never as passed).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <execinfo.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>

#include "core/gpu_util.hpp"
#include "core/launcher.hpp"
#include "ops/gemm/backend.hpp"

namespace {
// The GPU machine has no debugger: a crash prints its stack.
void print_stack(int sig) {
  void* frames[64];
  const int n = backtrace(frames, 64);
  dprintf(2, "signal %d, stack:\n", sig);
  backtrace_symbols_fd(frames, n, 2);
  _exit(128 + sig);
}
}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGSEGV, print_stack);
  std::signal(SIGABRT, print_stack);
  std::string why;
  if (!nvfp4::jit::detail::use_primary_context(0, &why)) {
    std::printf("SKIPPED: no usable GPU (%s)\n", why.c_str());
    return 77;
  }
  doctest::Context context(argc, argv);
  // The GEMM cases run where a GEMM backend serves the device's arch; elsewhere they are
  // reported as skipped (the other ops run on every arch).
  const nvfp4::jit::detail::Arch arch = nvfp4::jit::detail::current_device().arch;
  if (!nvfp4::jit::detail::find_gemm_backend(arch)) {
    std::printf("SKIPPED: the GEMM cases (no GEMM backend for %s yet)\n",
                std::string(nvfp4::jit::detail::to_string(arch)).c_str());
    context.addFilter("test-suite-exclude", "gpu_gemm,gpu_grouped_gemm");
    context.addFilter("test-case-exclude", "*gemm*");
  }
  return context.run();
}
