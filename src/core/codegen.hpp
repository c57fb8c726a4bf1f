// Codegen: a KernelSpec becomes a small, deterministic CUDA source that instantiates a
// template from templates/ with the spec's constants.
#pragma once
#include <string>
#include <string_view>

#include "core/spec.hpp"

namespace nvfp4::jit::detail {

struct GeneratedKernel {
  std::string name;    // extern "C" entry point, readable and unique per spec (arch aside)
  std::string source;  // includes templates by their embedded names
};

GeneratedKernel generate(const KernelSpec& spec);

// The one shape every generated source has: a comment naming the spec, the template's header,
// `declarations` (what the call names, if anything) and an extern "C" entry point
// `name(const __grid_constant__ nvfp4k::<params_type> p)` whose body is `call` (a template
// instantiation applied to p). Its launch bounds: `threads` a CTA, and with `min_blocks` > 0 the
// CTAs an SM must hold at once (ptxas fits the registers to them).
GeneratedKernel entry_point(const KernelSpec& spec, int threads, std::string name, std::string_view header,
                            std::string_view params_type, std::string_view call, int min_blocks = 0,
                            std::string_view declarations = {});

}  // namespace nvfp4::jit::detail
