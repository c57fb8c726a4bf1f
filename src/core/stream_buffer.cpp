#include "core/stream_buffer.hpp"

#include <string>
#include <utility>

#include "core/driver.hpp"

namespace nvfp4::jit::detail {

StreamBuffer::StreamBuffer(size_t bytes, CUstream stream, const char* what) : stream_(stream), what_(what) {
  check_cu(driver().cuMemAllocAsync(&ptr_, bytes, stream), (std::string("cuMemAllocAsync(") + what + ")").c_str());
}

StreamBuffer::StreamBuffer(StreamBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, 0)), stream_(other.stream_), what_(other.what_) {}

StreamBuffer& StreamBuffer::operator=(StreamBuffer&& other) noexcept {
  if (this != &other) {
    if (ptr_) driver().cuMemFreeAsync(ptr_, stream_);
    ptr_ = std::exchange(other.ptr_, 0);
    stream_ = other.stream_;
    what_ = other.what_;
  }
  return *this;
}

void StreamBuffer::free() {
  if (!ptr_) return;
  const CUresult result = driver().cuMemFreeAsync(std::exchange(ptr_, 0), stream_);
  check_cu(result, (std::string("cuMemFreeAsync(") + what_ + ")").c_str());
}

StreamBuffer::~StreamBuffer() {
  if (ptr_) driver().cuMemFreeAsync(ptr_, stream_);
}

}  // namespace nvfp4::jit::detail
