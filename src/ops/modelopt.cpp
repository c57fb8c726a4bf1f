// ModelOpt NVFP4 checkpoints -> the library's GEMM inputs. The formats match (docs/formats.md)
// so this is checks plus an optional scale-layout rewrite, or the device's fastest layout.
#include <cmath>

#include "nvfp4/jit.hpp"
#include "core/launcher.hpp"
#include "ops/gemm/backend.hpp"
#include "ops/gemm/call.hpp"
#include "ops/validate.hpp"

namespace nvfp4::jit {

namespace {

// The layer checked (by `check`'s name) and described as stored.
Nvfp4Linear described(const ModelOptLinear& layer, const detail::Check& check) {
  check.positive("n", layer.n);
  check.positive_multiple("k", layer.k, 32, "the GEMM reads two NVFP4 blocks at a time");
  check.buffer("weight", layer.weight, 16);
  check.buffer("weight_scale", layer.weight_scale, 16);
  for (auto [name, scale] : {std::pair{"weight_scale_2", layer.weight_scale_2}, {"input_scale", layer.input_scale}}) {
    check.global_scale(name, scale);
    if (scale.per_row) check.fail(name, fmt::format("{}.per_row is set: ModelOpt stores one scalar", name));
    if (!scale.device_ptr && !(scale.value > 0.0f))
      check.fail(name, fmt::format("{}.value = {} must be positive", name, scale.value));
    check.aligned(std::string(name) + ".device_ptr", scale.device_ptr, 4);
  }
  Nvfp4Linear out;
  out.weight = {layer.weight, layer.k / 2, layer.weight_scale, ScaleLayout::linear, layer.weight_scale_2};
  out.input_scale = layer.input_scale;
  return out;
}

// Whether the GEMM on a device of `arch` (or the backend emulating another there) runs a
// prepacked weight [n, k].
bool runs_prepacked(detail::Arch arch, int64_t n, int64_t k) {
  const detail::GemmBackend* backend = detail::find_gemm_backend(arch);
  return backend &&
         backend->unsupported(detail::gemm_problem(arch, n, k, DType::bf16, DType::bf16, ScaleLayout::linear, true, 0)).empty();
}

}  // namespace

Nvfp4Linear from_modelopt(const ModelOptLinear& layer, ScaleLayout layout, void* swizzled_scales, CUstream stream) {
  const detail::Check check("nvfp4::jit::from_modelopt");
  check.scale_layout("layout", layout);
  Nvfp4Linear out = described(layer, check);
  if (layout == ScaleLayout::swizzled128x4) {
    check.buffer("swizzled_scales", swizzled_scales, 16);
    convert_scales({layer.weight_scale, ScaleLayout::linear, swizzled_scales, ScaleLayout::swizzled128x4, layer.n, layer.k},
                   stream);
    out.weight.scales = swizzled_scales;
    out.weight.scale_layout = ScaleLayout::swizzled128x4;
  }
  return out;
}

Nvfp4Linear load_modelopt(const ModelOptLinear& layer, void* prepacked, CUstream stream, int64_t swiglu_interleave) {
  const detail::Check check("nvfp4::jit::load_modelopt");
  Nvfp4Linear out = described(layer, check);
  const detail::Arch arch = detail::CallDevice(stream, prepacked ? prepacked : layer.weight, "nvfp4::jit::load_modelopt").info.arch;
  if (!runs_prepacked(arch, layer.n, layer.k)) return out;  // (the block-scaled MMAs read the layout as stored)
  check.buffer("prepacked", prepacked, 16);
  PrepackArgs p;
  p.weight = out.weight, p.n = layer.n, p.k = layer.k, p.out = prepacked, p.swiglu_interleave = swiglu_interleave;
  prepack(p, stream);
  out.weight = {prepacked, 0, nullptr, ScaleLayout::linear, layer.weight_scale_2};
  out.prepacked = true;
  return out;
}

}  // namespace nvfp4::jit
