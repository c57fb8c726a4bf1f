#include "core/gpu_util.hpp"

#include "core/error.hpp"

namespace nvfp4::jit::detail {

bool use_primary_context(int ordinal, std::string* why) {
  if (!driver_available(why)) return false;
  const Driver& d = driver();
  int count = 0;
  if (d.cuDeviceGetCount(&count) != CUDA_SUCCESS || count <= ordinal) {
    if (why) *why = count ? "no such device" : "no CUDA device";
    return false;
  }
  CUdevice device = 0;
  CUcontext ctx = nullptr;
  check_cu(d.cuDeviceGet(&device, ordinal), "cuDeviceGet");
  check_cu(d.cuDevicePrimaryCtxRetain(&ctx, device), "cuDevicePrimaryCtxRetain");
  check_cu(d.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  return true;
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes) check_cu(driver().cuMemAlloc(&ptr_, bytes), "cuMemAlloc");
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  std::swap(ptr_, o.ptr_);
  std::swap(bytes_, o.bytes_);
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) driver().cuMemFree(ptr_);
}

// upload and fill return only once the device holds the bytes. cuMemcpyHtoD from pageable memory
// and cuMemsetD8 run on the legacy stream and may still be in flight when they return, and a
// non-blocking stream (every test's and bench's) does not wait for the legacy stream: a kernel
// launched there next could read old bytes, or have its output overwritten by the fill.
void DeviceBuffer::upload(const void* src, size_t bytes, size_t offset) {
  check_cu(driver().cuMemcpyHtoD(ptr_ + offset, src, bytes), "cuMemcpyHtoD");
  check_cu(driver().cuCtxSynchronize(), "cuCtxSynchronize after cuMemcpyHtoD");
}

void DeviceBuffer::download(void* dst, size_t bytes, size_t offset) const {
  check_cu(driver().cuMemcpyDtoH(dst, ptr_ + offset, bytes), "cuMemcpyDtoH");
}

void DeviceBuffer::fill(unsigned char byte) {
  check_cu(driver().cuMemsetD8(ptr_, byte, bytes_), "cuMemsetD8");
  check_cu(driver().cuCtxSynchronize(), "cuCtxSynchronize after cuMemsetD8");
}

// Enough memset to outlast a warm launch's host time, so the launches queue behind it.
constexpr size_t kBusyBytes = size_t(128) << 20;

EventTimer::EventTimer() : busy_(kBusyBytes) {
  check_cu(driver().cuEventCreate(&begin_, CU_EVENT_DEFAULT), "cuEventCreate");
  check_cu(driver().cuEventCreate(&end_, CU_EVENT_DEFAULT), "cuEventCreate");
}

EventTimer::~EventTimer() {
  driver().cuEventDestroy(begin_);
  driver().cuEventDestroy(end_);
}

void EventTimer::start(CUstream stream) {
  check_cu(driver().cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(busy_.get()), 0, kBusyBytes / 4, stream),
           "cuMemsetD32Async");
  check_cu(driver().cuEventRecord(begin_, stream), "cuEventRecord");
}

float EventTimer::stop_ms(CUstream stream) {
  check_cu(driver().cuEventRecord(end_, stream), "cuEventRecord");
  check_cu(driver().cuEventSynchronize(end_), "cuEventSynchronize");
  float ms = 0;
  check_cu(driver().cuEventElapsedTime(&ms, begin_, end_), "cuEventElapsedTime");
  return ms;
}

}  // namespace nvfp4::jit::detail
