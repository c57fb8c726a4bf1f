// The names of the public enums as kernel names and spec descriptions spell them.
#pragma once
#include <string_view>

#include "core/spec.hpp"
#include "nvfp4/jit.hpp"

namespace nvfp4::jit::detail {

inline std::string_view dtype_name(DType dtype) { return dtype_name(uint8_t(dtype)); }
inline std::string_view scale_layout_name(ScaleLayout layout) {
  return layout == ScaleLayout::linear ? "linear" : "sw128x4";
}

}  // namespace nvfp4::jit::detail
