// A device buffer allocated and freed in stream order (cuMemAllocAsync / cuMemFreeAsync, both
// recordable in a CUDA graph): the workspace of a call whose caller passed none.
#pragma once
#include <cuda.h>

#include <cstddef>

namespace nvfp4::jit::detail {

class StreamBuffer {
 public:
  StreamBuffer() = default;
  StreamBuffer(size_t bytes, CUstream stream, const char* what);
  StreamBuffer(StreamBuffer&& other) noexcept;
  StreamBuffer& operator=(StreamBuffer&& other) noexcept;
  StreamBuffer(const StreamBuffer&) = delete;
  StreamBuffer& operator=(const StreamBuffer&) = delete;
  // After the work that uses it is enqueued: freed in stream order, a failure thrown.
  void free();
  // A buffer not freed by free() (an exception on the way) is freed here, its result ignored.
  ~StreamBuffer();

  void* get() const { return reinterpret_cast<void*>(ptr_); }

 private:
  CUdeviceptr ptr_ = 0;
  CUstream stream_ = nullptr;
  const char* what_ = "";
};

}  // namespace nvfp4::jit::detail
