#include "ops/validate.hpp"

#include <cmath>

#include "common/params.cuh"

namespace nvfp4::jit::detail {

std::string_view dtype_label(DType dtype) {
  switch (dtype) {
    case DType::bf16: return "bf16";
    case DType::fp16: return "fp16";
    case DType::fp32: return "fp32";
    case DType::nvfp4: return "nvfp4";
  }
  return "unknown";
}

void Check::dtype_in(std::string_view arg, DType dtype, std::initializer_list<DType> allowed) const {
  std::string names;
  for (DType d : allowed) {
    if (d == dtype) return;
    names += fmt::format("{}{}", names.empty() ? "" : ", ", dtype_label(d));
  }
  fail(arg, fmt::format("{} = {} is not supported here (use one of: {})", arg,
                        dtype_label(dtype) == "unknown" ? std::to_string(int(dtype)) : std::string(dtype_label(dtype)), names),
       Status::unsupported);
}

void Check::scale_layout(std::string_view arg, ScaleLayout layout) const {
  if (layout != ScaleLayout::linear && layout != ScaleLayout::swizzled128x4)
    fail(arg, fmt::format("{} = {} is not a scale layout (linear or swizzled128x4)", arg, int(layout)));
}

int Check::global_scale(std::string_view arg, const GlobalScale& scale) const {
  if (scale.device_ptr) return scale.per_row ? nvfp4k::GSCALE_DEVICE_PER_ROW : nvfp4k::GSCALE_DEVICE;
  // A size helper is asked before the buffers exist: a per-row scale's among them.
  if (!pointers_) return scale.per_row ? nvfp4k::GSCALE_DEVICE_PER_ROW : nvfp4k::GSCALE_HOST;
  if (scale.per_row) fail(arg, fmt::format("{}.per_row is set but {}.device_ptr is null", arg, arg));
  // 0 is what a zero-filled C struct holds: it would turn every value into 0 without a word.
  if (!(scale.value > 0.0f && std::isfinite(scale.value)))
    fail(arg, fmt::format("{}.value = {} must be positive and finite (a zero-filled C struct? start from its "
                          "nvfp4_*_args_init())", arg, scale.value));
  return nvfp4k::GSCALE_HOST;
}

int64_t Check::bytes(std::string_view what, std::initializer_list<int64_t> factors) const {
  int64_t product = 1;
  for (int64_t f : factors)
    if (__builtin_mul_overflow(product, f, &product))
      fail(what, fmt::format("{} does not fit in 64 bits: the sizes are out of range", what));
  return product;
}

int64_t Check::span(std::string_view tensor, std::string_view rows_arg, int64_t rows, std::string_view stride_arg,
                    int64_t stride, int64_t element_bytes) const {
  int64_t bytes = 0;
  if (__builtin_mul_overflow(rows, stride, &bytes) || __builtin_mul_overflow(bytes, element_bytes, &bytes))
    fail(rows_arg, fmt::format("{}: {} = {} rows of {} = {} (units of {} bytes) span more than 2^63 bytes: offsets into "
                               "it do not fit in 64 bits",
                               tensor, rows_arg, rows, stride_arg, stride, element_bytes));
  return bytes;
}

}  // namespace nvfp4::jit::detail
