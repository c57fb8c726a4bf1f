// Scale-layout conversion: E4M3 block scales from one layout to another (prepack step).
#pragma once
#include "core/codegen.hpp"
#include "core/spec.hpp"
#include "nvfp4/jit.hpp"

namespace nvfp4::jit::detail {

// scale_layout holds the destination layout, flags the source layout.
KernelSpec convert_scales_spec(Arch arch, int64_t k, ScaleLayout src, ScaleLayout dst);
GeneratedKernel generate_convert_scales(const KernelSpec& spec);

}  // namespace nvfp4::jit::detail
