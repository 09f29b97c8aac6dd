#include "cuda_memory.h"

#ifdef NK_WITH_CUDA

#include <utility>

namespace nktool {

void cuda_check(cudaError_t err, const std::string& what, const std::string& context) {
  if (err == cudaSuccess) return;
  throw std::runtime_error(what + " failed: " + cudaGetErrorName(err) + " (" +
                           cudaGetErrorString(err) + ")" +
                           (context.empty() ? "" : "; " + context));
}

DeviceBuffer::DeviceBuffer(size_t bytes, const std::string& label, const std::string& context)
    : bytes_(bytes) {
  if (bytes == 0) return;
  cuda_check(cudaMalloc(&ptr_, bytes), "cudaMalloc of " + format_bytes(bytes) + " for " + label,
             context);
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);  // errors here have nowhere to go; a later checked call reports them
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

CudaEvent::CudaEvent() { cuda_check(cudaEventCreate(&event_), "cudaEventCreate"); }

CudaEvent::~CudaEvent() {
  if (event_) cudaEventDestroy(event_);
}

}  // namespace nktool

#endif  // NK_WITH_CUDA
