// CUDA runtime helpers for the tool (only compiled with NK_WITH_CUDA): a checked-call wrapper
// that names what failed, an owning device buffer, and an arena that carves one buffer into
// the tensors of a benchmarked shape.
#pragma once

#ifdef NK_WITH_CUDA

#include <cuda_runtime.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

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

// Device memory owned by someone else (a DeviceArena): a pointer and a size.
class DeviceSpan {
 public:
  DeviceSpan() = default;
  DeviceSpan(void* ptr, size_t bytes) : ptr_(ptr), bytes_(bytes) {}
  void* get() const { return ptr_; }
  unsigned char* bytes() const { return static_cast<unsigned char*>(ptr_); }
  size_t size() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// One cudaMalloc'ed block, kept from one carve() to the next and grown when a carve needs more,
// so that a shape's tensors do not sit wherever the previous shapes' frees left room. With
// `separate` each request gets its own cudaMalloc instead (the bench's allocation before the
// thirty-fifth session, for A/Bs).
class DeviceArena {
 public:
  struct Request {
    DeviceSpan* span;  // set by carve()
    size_t bytes;      // 0 leaves the span empty
    const char* label;
  };
  static constexpr size_t kAlignment = 256;

  explicit DeviceArena(bool separate = false) : separate_(separate) {}
  // Points every request's span at its own kAlignment-aligned part of the block (or, with
  // `separate`, at its own allocation). Spans of an earlier carve() are invalid afterwards.
  void carve(const std::vector<Request>& requests, const std::string& context);
  size_t capacity() const { return block_.size(); }

 private:
  bool separate_;
  DeviceBuffer block_;
  std::vector<DeviceBuffer> separate_buffers_;
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
