// Memory layouts of `normkit check` tensors: row padding for strided cases (sometimes odd), an
// element offset that breaks 16-byte alignment for misaligned cases, and sometimes a stride
// argument of 0 ("contiguous"). Shared by the forward/backward cases and the quantized ones.
#pragma once

#include <cstdint>

#include "host_tensor.h"
#include "normkit/normkit.h"
#include "random.h"

namespace nktool {

class LayoutChooser {
 public:
  // rows x hidden is the shape of the case's matrices; strided / misaligned as in CheckCase.
  LayoutChooser(int64_t rows, int64_t hidden, bool strided, bool misaligned, Random& rng)
      : rows_(rows), hidden_(hidden), strided_(strided), misaligned_(misaligned), rng_(rng) {}

  // [rows, hidden]; stride 0 = choose one (padded when strided).
  HostTensor matrix(nk_dtype dtype, int64_t stride = 0) {
    return matrix(dtype, rows_, hidden_, stride);
  }
  // Any [rows, cols] matrix laid out by the same rules (e.g. a transposed output).
  HostTensor matrix(nk_dtype dtype, int64_t rows, int64_t cols, int64_t stride = 0);
  // [rows, cols] with stride == cols, for outputs the API defines as dense (scales).
  HostTensor dense(nk_dtype dtype, int64_t rows, int64_t cols) {
    return HostTensor(dtype, rows, cols, cols, offset(dtype));
  }
  HostTensor vector(nk_dtype dtype, int64_t n) { return dense(dtype, 1, n); }

 private:
  int64_t offset(nk_dtype dtype);

  int64_t rows_, hidden_;
  bool strided_, misaligned_;
  Random& rng_;
};

}  // namespace nktool
