// Host buffers for `normkit check`: a [rows, cols] matrix of one dtype placed at an element
// offset from a 256-byte-aligned base (so the pointer can sit off 16-byte alignment), with row
// padding and a guard tail. Every byte outside the logical elements holds a poison pattern, so
// writes out of bounds are detectable; outputs are poisoned entirely before each run, so
// elements a backend forgets to write read back as NaN (or, for int8, as -128, a code the
// quantized forward never produces).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <vector>

#include "normkit/normkit.h"
#include "random.h"

namespace nktool {

class HostTensor {
 public:
  // 0xFF / 0xFFFF / 0xFFFFFFFF: NaN in every floating dtype (e4m3, e5m2 and e8m0 included).
  static constexpr unsigned char kPoisonByte = 0xFF;
  // int8 has no NaN and 0xFF is -1, a valid code; 0x80 (-128) is never written (see nk_quant_mode).
  static constexpr unsigned char kInt8PoisonByte = 0x80;
  static constexpr unsigned char poison_byte_for(nk_dtype dtype) {
    return dtype == NK_INT8 ? kInt8PoisonByte : kPoisonByte;
  }
  static constexpr size_t kBaseAlignment = 256;
  static constexpr size_t kGuardBytes = 64;

  HostTensor() = default;
  // row_stride >= cols (elements); offset_elements shifts element (0, 0) from the aligned base.
  HostTensor(nk_dtype dtype, int64_t rows, int64_t cols, int64_t row_stride,
             int64_t offset_elements);
  HostTensor(HostTensor&&) = default;
  HostTensor& operator=(HostTensor&&) = default;

  bool empty() const { return storage_bytes_ == 0; }
  nk_dtype dtype() const { return dtype_; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int64_t row_stride() const { return row_stride_; }
  size_t offset_bytes() const { return offset_bytes_; }

  // The row stride to pass to the API: 0 ("contiguous") or the real stride. Defaults to the
  // real stride.
  int64_t stride_argument() const { return stride_argument_; }
  void set_stride_argument(int64_t stride) { stride_argument_ = stride; }

  // The whole allocation (padding and guard included), for copies to and from a device.
  unsigned char* storage() { return base_; }
  const unsigned char* storage() const { return base_; }
  size_t storage_bytes() const { return storage_bytes_; }

  void* data() { return base_ + offset_bytes_; }
  const void* data() const { return base_ + offset_bytes_; }

  float get(int64_t r, int64_t c) const;
  void set(int64_t r, int64_t c, float value);  // rounded to dtype (nearest even)

  unsigned char poison_byte() const { return poison_byte_for(dtype_); }
  void poison();  // every byte of the allocation := poison_byte()

  // Logical elements := magnitude uniform in [lo, hi) with a random sign (never zero when
  // lo > 0), plus `center`; everything else poisoned. Then remembers the contents (snapshot).
  void fill_random(Random& rng, float lo, float hi, float center = 0.0f);

  // Remember the current contents / put them back / ask whether they are still the same.
  void snapshot();
  void restore();
  bool unchanged_since_snapshot() const;

  // Number of bytes outside the logical elements that no longer hold the poison pattern.
  int64_t bytes_written_outside() const;

 private:
  nk_dtype dtype_ = NK_FLOAT32;
  int64_t rows_ = 0, cols_ = 0, row_stride_ = 0, stride_argument_ = 0;
  size_t element_bytes_ = 0;
  size_t offset_bytes_ = 0;
  size_t storage_bytes_ = 0;
  std::unique_ptr<unsigned char[]> raw_;  // storage_bytes_ + kBaseAlignment
  unsigned char* base_ = nullptr;         // raw_ rounded up to kBaseAlignment
  std::vector<unsigned char> pristine_;   // snapshot of the allocation
};

// The tensors of a check case, as lists: the non-empty ones among `candidates`; inputs then
// outputs; every input restored from its snapshot and every output poisoned (before a backend
// runs).
std::vector<HostTensor*> non_empty(std::initializer_list<HostTensor*> candidates);
std::vector<HostTensor*> joined(std::vector<HostTensor*> inputs,
                                const std::vector<HostTensor*>& outputs);
void restore_and_poison(const std::vector<HostTensor*>& inputs,
                        const std::vector<HostTensor*>& outputs);

// A plain byte buffer aligned to 256 bytes (host workspace).
class AlignedBytes {
 public:
  explicit AlignedBytes(size_t bytes);
  void* data() { return base_; }
  size_t size() const { return bytes_; }

 private:
  size_t bytes_;
  std::unique_ptr<unsigned char[]> raw_;
  unsigned char* base_;
};

}  // namespace nktool
