// CUDA runtime helpers for the tool (only compiled with NK_WITH_CUDA): a checked-call wrapper
// that names what failed, and an owning device buffer.
#pragma once

#ifdef NK_WITH_CUDA

#include <cuda_runtime.h>

#include <cstddef>
#include <stdexcept>
#include <string>

#include "text_format.h"

namespace nktool {

// Throws std::runtime_error("<what> failed: <CUDA error name> (<description>)[; <context>]").
void cuda_check(cudaError_t err, const std::string& what, const std::string& context = "");

// cudaMalloc'ed memory, freed on destruction. Allocation failures throw with `label` and the
// size in the message.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(size_t bytes, const std::string& label, const std::string& context = "");
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  unsigned char* bytes() const { return static_cast<unsigned char*>(ptr_); }
  size_t size() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// A CUDA event, destroyed on destruction.
class CudaEvent {
 public:
  CudaEvent();
  ~CudaEvent();
  CudaEvent(CudaEvent&& other) noexcept : event_(other.event_) { other.event_ = nullptr; }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace nktool

#endif  // NK_WITH_CUDA
