// TMA descriptors (CUtensorMap): the key that states every argument of their encoding, the list
// of them a launch's parameter block takes, and a cache that encodes each key once.
#pragma once
#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <unordered_map>

namespace nvfp4::jit::detail {

// Every argument of cuTensorMapEncodeTiled, dimensions innermost first (unused ones 1, unused
// strides 0). A descriptor is a function of these alone (the encode is host-only and reads no
// memory), so one key is one descriptor whatever its memory holds now: a buffer freed and
// allocated again at the same address with the same shape keeps its descriptor, and any other
// address or shape is another key.
struct TensorMapKey {
  const void* base = nullptr;
  uint64_t dims[3] = {1, 1, 1};
  uint64_t strides[2] = {0, 0};  // bytes, of dimensions 1 and 2
  uint32_t box[3] = {1, 1, 1};
  uint32_t element_strides[3] = {1, 1, 1};
  uint32_t rank = 2;
  int32_t type = 0;
  int32_t interleave = CU_TENSOR_MAP_INTERLEAVE_NONE;
  int32_t swizzle = CU_TENSOR_MAP_SWIZZLE_NONE;
  int32_t l2_promotion = CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
  int32_t oob_fill = CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE;

  bool operator==(const TensorMapKey& o) const { return std::memcmp(this, &o, sizeof o) == 0; }
};
static_assert(std::has_unique_object_representations_v<TensorMapKey>, "TensorMapKey must have no padding");

// A row-major [rows, cols] tensor of `type` elements, read in boxes of box_rows x box_cols.
inline TensorMapKey tensor_map_2d(const void* base, CUtensorMapDataType type, uint64_t rows, uint64_t cols,
                                  uint64_t row_stride_bytes, uint32_t box_rows, uint32_t box_cols,
                                  CUtensorMapSwizzle swizzle) {
  TensorMapKey key;
  key.base = base;
  key.rank = 2;
  key.type = int32_t(type);
  key.dims[0] = cols, key.dims[1] = rows;
  key.strides[0] = row_stride_bytes;
  key.box[0] = box_cols, key.box[1] = box_rows;
  key.swizzle = int32_t(swizzle);
  return key;
}

// [groups] row-major [rows, cols] tensors at any row and group strides (boxes of one group's rows).
inline TensorMapKey tensor_map_3d(const void* base, CUtensorMapDataType type, uint64_t groups, uint64_t rows,
                                  uint64_t cols, uint64_t row_stride_bytes, uint64_t group_stride_bytes,
                                  uint32_t box_rows, uint32_t box_cols, CUtensorMapSwizzle swizzle) {
  TensorMapKey key = tensor_map_2d(base, type, rows, cols, row_stride_bytes, box_rows, box_cols, swizzle);
  key.rank = 3;
  key.dims[2] = groups;
  key.strides[1] = group_stride_bytes;
  return key;
}

// The descriptors a launch's parameter block takes: each its key and the 128 bytes of the block
// it is written to.
class TensorMapList {
 public:
  static constexpr int kMaxMaps = 4;
  struct Entry {
    void* to = nullptr;
    TensorMapKey key;
  };
  void add(void* to, const TensorMapKey& key);  // throws past kMaxMaps
  const Entry* begin() const { return entries_; }
  const Entry* end() const { return entries_ + count_; }
  int size() const { return count_; }

 private:
  Entry entries_[kMaxMaps];
  int count_ = 0;
};

// Encodes `key` into `map` (cuTensorMapEncodeTiled's result).
using TensorMapEncoder = CUresult (*)(CUtensorMap* map, const TensorMapKey& key);
CUresult encode_tensor_map(CUtensorMap* map, const TensorMapKey& key);  // through the driver

// Descriptors by key: each encoded on its first use, then copied from here. One per thread (the
// launcher's), so it takes no lock. A thread that meets more than `capacity` keys starts over
// rather than grow without bound.
class TensorMapCache {
 public:
  static constexpr size_t kDefaultCapacity = 4096;  // a model's weights, each at its tiles' boxes
  explicit TensorMapCache(TensorMapEncoder encode = encode_tensor_map, size_t capacity = kDefaultCapacity);

  // The descriptor of `key`. Throws Error(cuda_error) naming cuTensorMapEncodeTiled where the
  // encoder refuses it (nothing is kept then).
  const CUtensorMap& get(const TensorMapKey& key);
  // Writes each of `maps`' descriptors where it goes.
  void write(const TensorMapList& maps);
  size_t size() const { return maps_.size(); }

 private:
  struct KeyHash {
    size_t operator()(const TensorMapKey& key) const noexcept;
  };
  TensorMapEncoder encode_;
  size_t capacity_;
  std::unordered_map<TensorMapKey, CUtensorMap, KeyHash> maps_;
};

}  // namespace nvfp4::jit::detail
