// GPU tests: run on a machine with a supported GPU; elsewhere exit 77, which CTest reports
// as skipped (never as passed).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "core/gpu_util.hpp"

int main(int argc, char** argv) {
  std::string why;
  if (!nvfp4::jit::detail::use_primary_context(0, &why)) {
    std::printf("SKIPPED: no usable GPU (%s)\n", why.c_str());
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
