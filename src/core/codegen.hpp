// Codegen: a KernelSpec becomes a small, deterministic CUDA source that instantiates a
// template from templates/ with the spec's constants.
#pragma once
#include <string>

#include "core/spec.hpp"

namespace nvfp4::jit::detail {

struct GeneratedKernel {
  std::string name;    // extern "C" entry point, readable and unique per spec (arch aside)
  std::string source;  // includes templates by their embedded names
};

GeneratedKernel generate(const KernelSpec& spec);

}  // namespace nvfp4::jit::detail
