#include "core/tensor_map.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "core/driver.hpp"
#include "core/error.hpp"

namespace nvfp4::jit::detail {

void TensorMapList::add(void* to, const TensorMapKey& key) {
  if (count_ == kMaxMaps) fail(Status::internal, "a launch takes at most {} tensor maps", kMaxMaps);
  entries_[count_++] = {to, key};
}

CUresult encode_tensor_map(CUtensorMap* map, const TensorMapKey& key) {
  const cuuint64_t dims[3] = {key.dims[0], key.dims[1], key.dims[2]};
  const cuuint64_t strides[2] = {key.strides[0], key.strides[1]};
  const cuuint32_t box[3] = {key.box[0], key.box[1], key.box[2]};
  const cuuint32_t element_strides[3] = {key.element_strides[0], key.element_strides[1], key.element_strides[2]};
  return driver().cuTensorMapEncodeTiled(map, CUtensorMapDataType(key.type), key.rank, const_cast<void*>(key.base), dims,
                                         strides, box, element_strides, CUtensorMapInterleave(key.interleave),
                                         CUtensorMapSwizzle(key.swizzle), CUtensorMapL2promotion(key.l2_promotion),
                                         CUtensorMapFloatOOBfill(key.oob_fill));
}

size_t TensorMapCache::KeyHash::operator()(const TensorMapKey& key) const noexcept {
  return size_t(XXH3_64bits(&key, sizeof key));
}

TensorMapCache::TensorMapCache(TensorMapEncoder encode, size_t capacity) : encode_(encode), capacity_(capacity) {}

const CUtensorMap& TensorMapCache::get(const TensorMapKey& key) {
  if (auto it = maps_.find(key); it != maps_.end()) return it->second;
  CUtensorMap map{};
  if (const CUresult r = encode_(&map, key); r != CUDA_SUCCESS) {
    const char* name = nullptr;
    if (driver_available(nullptr)) driver().cuGetErrorName(r, &name);
    fail(Status::cuda_error,
         "cuTensorMapEncodeTiled failed: {} (CUresult {}) for a rank-{} map at {} of type {}: dims {}x{}x{}, strides "
         "{}/{} bytes, box {}x{}x{}, swizzle {}",
         name ? name : "?", int(r), key.rank, key.base, key.type, key.dims[0], key.dims[1], key.dims[2],
         key.strides[0], key.strides[1], key.box[0], key.box[1], key.box[2], key.swizzle);
  }
  if (maps_.size() >= capacity_) maps_.clear();
  return maps_.emplace(key, map).first->second;
}

void TensorMapCache::write(const TensorMapList& maps) {
  for (const TensorMapList::Entry& e : maps) std::memcpy(e.to, &get(e.key), sizeof(CUtensorMap));
}

}  // namespace nvfp4::jit::detail
