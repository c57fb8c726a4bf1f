// Argument checks shared by every public entry point. Each failure throws
// Error(invalid_argument or unsupported) with "<entry point>: <argument> ...".
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "core/error.hpp"
#include "core/launcher.hpp"
#include "nvfp4/jit.hpp"

namespace nvfp4::jit::detail {

inline bool aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }
std::string_view dtype_label(DType dtype);
// Bytes of one element of a BF16 / FP16 / FP32 tensor.
inline int element_bytes(DType dtype) { return dtype == DType::fp32 ? 4 : 2; }

class Check {
 public:
  // `pointers` false: the sizes, strides and modes only (a size helper, asked before the
  // buffers exist): not_null and aligned pass.
  explicit Check(std::string_view who, bool pointers = true) : who_(who), pointers_(pointers) {}

  [[noreturn]] void fail(std::string_view /*arg*/, const std::string& message, Status status = Status::invalid_argument) const {
    throw Error(status, fmt::format("{}: {}", who_, message));
  }
  void not_null(std::string_view arg, const void* p) const {
    if (!p && !load_only() && pointers_) fail(arg, fmt::format("{} is null", arg));  // ensure_loaded reads no pointer
  }
  void aligned(std::string_view arg, const void* p, uintptr_t bytes) const {
    if (pointers_ && !detail::aligned(p, bytes))
      fail(arg, fmt::format("{} = {} is not {}-byte aligned", arg, p, bytes));
  }
  // A buffer the call reads or writes: not null, and aligned to `bytes`.
  void buffer(std::string_view arg, const void* p, uintptr_t bytes) const {
    not_null(arg, p);
    aligned(arg, p, bytes);
  }
  void not_negative(std::string_view arg, int64_t v) const {
    if (v < 0) fail(arg, fmt::format("{} = {} is negative", arg, v));
  }
  void positive(std::string_view arg, int64_t v) const {
    if (v <= 0) fail(arg, fmt::format("{} = {} must be positive", arg, v));
    at_most_int32(arg, v);
  }
  void positive_multiple(std::string_view arg, int64_t v, int64_t of, std::string_view why) const {
    if (v <= 0 || v % of) fail(arg, fmt::format("{} = {} must be a positive multiple of {} ({})", arg, v, of, why));
    at_most_int32(arg, v);
  }
  // A dimension a kernel is specialized on (N, K, groups) or indexes with 32 bits.
  void at_most_int32(std::string_view arg, int64_t v) const {
    if (v > INT32_MAX) fail(arg, fmt::format("{} = {} is out of range (at most 2^31 - 1)", arg, v));
  }
  // The product of `factors` (a size in bytes or elements), or a failure naming `what` when it
  // overflows int64.
  int64_t bytes(std::string_view what, std::initializer_list<int64_t> factors) const;
  // The bytes `rows` rows of `stride` elements of `element_bytes` span in `tensor`: every byte
  // offset a kernel forms in it (row * stride * element_bytes + column) is below that, so it
  // must fit in 64 bits; else a failure naming both arguments.
  int64_t span(std::string_view tensor, std::string_view rows_arg, int64_t rows, std::string_view stride_arg, int64_t stride,
               int64_t element_bytes) const;
  // span of the E4M3 scales of `rows` NVFP4 rows of k values, in either layout (swizzled128x4
  // pads the rows to 128 and the k / 16 scales of a row to 4). `rows` a checked span's already.
  void scale_span(std::string_view tensor, std::string_view rows_arg, int64_t rows, int64_t k) const {
    span(tensor, rows_arg, rows + 127, "k / 16", k / 16 + 3, 1);
  }
  void dtype_in(std::string_view arg, DType dtype, std::initializer_list<DType> allowed) const;
  void scale_layout(std::string_view arg, ScaleLayout layout) const;
  void index_type(std::string_view arg, IndexType type) const {
    if (type != IndexType::int32 && type != IndexType::int64)
      fail(arg, fmt::format("{} = {} is not an IndexType (int32 or int64)", arg, int(type)));
  }
  // Returns the GlobalScaleCode the kernels use.
  int global_scale(std::string_view arg, const GlobalScale& scale) const;
  // false for a size helper's check, which is asked for the buffers' sizes themselves.
  bool checks_buffers() const { return pointers_; }

 private:
  std::string_view who_;
  bool pointers_;
};

}  // namespace nvfp4::jit::detail
