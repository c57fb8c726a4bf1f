// Router top-k ids as int32 or int64 (DeepEP's convention), read and written by value, the same
// on the device and in the CPU reference.
#pragma once
#include "common/portable.cuh"

namespace nvfp4k {

NVFP4_HD long long load_id(const void* ids, bool is64, long long i) {
  return is64 ? static_cast<const long long*>(ids)[i] : static_cast<const int*>(ids)[i];
}

// An id that int32 cannot hold is stored to an int32 output as -1 (no expert).
NVFP4_HD void store_id(void* ids, bool is64, long long i, long long id) {
  if (is64) static_cast<long long*>(ids)[i] = id;
  else static_cast<int*>(ids)[i] = id >= -2147483648LL && id <= 2147483647LL ? int(id) : -1;
}

}  // namespace nvfp4k
