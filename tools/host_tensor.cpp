#include "host_tensor.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "common/dtype_host.h"

namespace nktool {
namespace {

unsigned char* align_up(unsigned char* p, size_t alignment) {
  const auto v = reinterpret_cast<uintptr_t>(p);
  return p + (alignment - v % alignment) % alignment;
}

}  // namespace

HostTensor::HostTensor(nk_dtype dtype, int64_t rows, int64_t cols, int64_t row_stride,
                       int64_t offset_elements)
    : dtype_(dtype), rows_(rows), cols_(cols), row_stride_(row_stride),
      stride_argument_(row_stride) {
  element_bytes_ = normkit::host_dtype_size(dtype);
  if (element_bytes_ == 0 || rows < 1 || cols < 1 || row_stride < cols || offset_elements < 0) {
    throw std::invalid_argument("HostTensor: bad layout rows " + std::to_string(rows) + " cols " +
                                std::to_string(cols) + " stride " + std::to_string(row_stride));
  }
  offset_bytes_ = static_cast<size_t>(offset_elements) * element_bytes_;
  const size_t span = static_cast<size_t>((rows - 1) * row_stride + cols) * element_bytes_;
  storage_bytes_ = offset_bytes_ + span + kGuardBytes;
  raw_.reset(new unsigned char[storage_bytes_ + kBaseAlignment]);
  base_ = align_up(raw_.get(), kBaseAlignment);
  poison();
}

float HostTensor::get(int64_t r, int64_t c) const {
  return normkit::load_as_float(data(), dtype_, r * row_stride_ + c);
}

void HostTensor::set(int64_t r, int64_t c, float value) {
  normkit::store_from_float(data(), dtype_, r * row_stride_ + c, value);
}

void HostTensor::poison() { std::memset(base_, poison_byte(), storage_bytes_); }

void HostTensor::fill_random(Random& rng, float lo, float hi, float center) {
  poison();
  for (int64_t r = 0; r < rows_; ++r) {
    for (int64_t c = 0; c < cols_; ++c) set(r, c, center + rng.signed_magnitude(lo, hi));
  }
  snapshot();
}

void HostTensor::snapshot() { pristine_.assign(base_, base_ + storage_bytes_); }

void HostTensor::restore() {
  if (pristine_.size() != storage_bytes_) throw std::logic_error("HostTensor: no snapshot");
  std::memcpy(base_, pristine_.data(), storage_bytes_);
}

bool HostTensor::unchanged_since_snapshot() const {
  return pristine_.size() == storage_bytes_ &&
         std::memcmp(base_, pristine_.data(), storage_bytes_) == 0;
}

int64_t HostTensor::bytes_written_outside() const {
  int64_t count = 0;
  const unsigned char poison = poison_byte();
  auto scan = [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) count += base_[i] != poison;
  };
  size_t previous_end = 0;
  for (int64_t r = 0; r < rows_; ++r) {
    const size_t begin = offset_bytes_ + static_cast<size_t>(r * row_stride_) * element_bytes_;
    scan(previous_end, begin);
    previous_end = begin + static_cast<size_t>(cols_) * element_bytes_;
  }
  scan(previous_end, storage_bytes_);
  return count;
}

AlignedBytes::AlignedBytes(size_t bytes)
    : bytes_(bytes), raw_(new unsigned char[bytes + HostTensor::kBaseAlignment]) {
  base_ = align_up(raw_.get(), HostTensor::kBaseAlignment);
  std::memset(base_, HostTensor::kPoisonByte, bytes_);
}

std::vector<HostTensor*> non_empty(std::initializer_list<HostTensor*> candidates) {
  std::vector<HostTensor*> list;
  for (HostTensor* t : candidates) {
    if (!t->empty()) list.push_back(t);
  }
  return list;
}

std::vector<HostTensor*> joined(std::vector<HostTensor*> inputs,
                                const std::vector<HostTensor*>& outputs) {
  inputs.insert(inputs.end(), outputs.begin(), outputs.end());
  return inputs;
}

void restore_and_poison(const std::vector<HostTensor*>& inputs,
                        const std::vector<HostTensor*>& outputs) {
  for (HostTensor* t : inputs) t->restore();
  for (HostTensor* t : outputs) t->poison();
}

}  // namespace nktool
