#include "core/codegen.hpp"

#include <fmt/format.h>

#include "core/op_registry.hpp"

namespace nvfp4::jit::detail {

GeneratedKernel entry_point(const KernelSpec& spec, int threads, std::string name, std::string_view header,
                            std::string_view params_type, std::string_view call, int min_blocks,
                            std::string_view declarations) {
  GeneratedKernel g;
  g.source = fmt::format(
      "// nvfp4-jit generated: {}\n"
      "#include \"{}\"\n\n"
      "{}{}"
      "extern \"C\" __global__ void __launch_bounds__({}{}) {}(const __grid_constant__ nvfp4k::{} p) {{\n"
      "  {};\n"
      "}}\n",
      spec.describe(), header, declarations, declarations.empty() ? "" : "\n", threads,
      min_blocks > 0 ? fmt::format(", {}", min_blocks) : "", name, params_type, call);
  g.name = std::move(name);
  return g;
}

GeneratedKernel generate(const KernelSpec& spec) { return op_kernels(spec.op).generate(spec); }

}  // namespace nvfp4::jit::detail
