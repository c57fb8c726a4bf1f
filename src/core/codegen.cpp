#include "core/codegen.hpp"

#include "core/error.hpp"
#include "ops/convert_scales_op.hpp"
#include "ops/prepack_op.hpp"
#include "ops/dequantize_op.hpp"
#include "ops/gemm_op.hpp"
#include "ops/quantize_op.hpp"
#include "ops/row_quantize_op.hpp"

namespace nvfp4::jit::detail {

GeneratedKernel entry_point(const KernelSpec& spec, std::string name, std::string_view header,
                            std::string_view params_type, std::string_view call, std::string_view prelude) {
  GeneratedKernel g;
  g.source = fmt::format(
      "// nvfp4-jit generated: {}\n"
      "#include \"{}\"\n\n"
      "{}"
      "extern \"C\" __global__ void __launch_bounds__({}) {}(const __grid_constant__ nvfp4k::{} p) {{\n"
      "  {};\n"
      "}}\n",
      spec.describe(), header, prelude, spec.tile.threads, name, params_type, call);
  g.name = std::move(name);
  return g;
}

GeneratedKernel generate(const KernelSpec& spec) {
  switch (spec.op) {
    case Op::dequantize: return generate_dequantize(spec);
    case Op::quantize: return generate_quantize(spec);
    case Op::row_amax:
    case Op::amax_finalize: return generate_amax(spec);
    case Op::convert_scales: return generate_convert_scales(spec);
    case Op::gemm: return generate_gemm(spec);
    case Op::rmsnorm_quantize:
    case Op::swiglu_quantize:
    case Op::moe_stage: return generate_row_quantize(spec);
    case Op::prepack: return generate_prepack(spec);
  }
  fail(Status::internal, "codegen: unknown op {}", static_cast<int>(spec.op));
}

}  // namespace nvfp4::jit::detail
