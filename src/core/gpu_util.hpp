// Small driver-API helpers for the GPU tests and benchmarks (never on a kernel's call path):
// a primary context, device buffers, event timing.
#pragma once
#include <cuda.h>

#include <cstddef>
#include <vector>

#include "core/driver.hpp"

namespace nvfp4::jit::detail {

// Makes device `ordinal`'s primary context current on this thread; returns false when there
// is no driver or device (fills `why`).
bool use_primary_context(int ordinal = 0, std::string* why = nullptr);

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  ~DeviceBuffer();
  void* get() const { return reinterpret_cast<void*>(ptr_); }
  template <class T>
  T* as() const { return reinterpret_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }
  // upload and fill are complete when they return: work on any stream then sees the bytes.
  void upload(const void* src, size_t bytes, size_t offset = 0);
  void download(void* dst, size_t bytes, size_t offset = 0) const;
  void fill(unsigned char byte);

 private:
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;
};

template <class T>
DeviceBuffer to_device(const std::vector<T>& v) {
  DeviceBuffer b(v.size() * sizeof(T));
  b.upload(v.data(), b.bytes());
  return b;
}

// Milliseconds of GPU time between start() and stop_ms() on `stream`. start() first gives the
// GPU tens of microseconds of other work (a memset of a scratch buffer, which also evicts L2),
// so the host is done enqueueing the timed work before the GPU reaches it: without that, the
// host's launch time (several microseconds) would be inside the interval of a short kernel.
class EventTimer {
 public:
  EventTimer();
  ~EventTimer();
  void start(CUstream stream);
  float stop_ms(CUstream stream);

 private:
  CUevent begin_ = nullptr, end_ = nullptr;
  DeviceBuffer busy_;
};

}  // namespace nvfp4::jit::detail
