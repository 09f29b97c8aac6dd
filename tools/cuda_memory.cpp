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

void DeviceArena::carve(const std::vector<Request>& requests, const std::string& context) {
  separate_buffers_.clear();
  if (separate_) {
    for (const Request& r : requests) {
      separate_buffers_.emplace_back(r.bytes, r.label, context);
      *r.span = DeviceSpan(separate_buffers_.back().get(), r.bytes);
    }
    return;
  }
  const auto aligned = [](size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; };
  size_t total = 0;
  for (const Request& r : requests) total += aligned(r.bytes);
  if (total > block_.size()) {
    block_ = DeviceBuffer();  // free the old block first: never both at once
    block_ = DeviceBuffer(total, "the benchmark's tensors", context);
  }
  size_t offset = 0;
  for (const Request& r : requests) {
    *r.span = r.bytes ? DeviceSpan(block_.bytes() + offset, r.bytes) : DeviceSpan();
    offset += aligned(r.bytes);
  }
}

CudaEvent::CudaEvent() { cuda_check(cudaEventCreate(&event_), "cudaEventCreate"); }

CudaEvent::~CudaEvent() {
  if (event_) cudaEventDestroy(event_);
}

}  // namespace nktool

#endif  // NK_WITH_CUDA
