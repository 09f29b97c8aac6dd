#include "check_layout.h"

#include "common/dtype_host.h"

namespace nktool {

HostTensor LayoutChooser::matrix(nk_dtype dtype, int64_t rows, int64_t cols, int64_t stride) {
  if (stride == 0) stride = cols + (strided_ ? 1 + static_cast<int64_t>(rng_.below(9)) : 0);
  HostTensor t(dtype, rows, cols, stride, offset(dtype));
  if (stride == cols && rng_.coin()) t.set_stride_argument(0);
  return t;
}

// A whole number of elements (the API requires element alignment), never a multiple of 16
// bytes; for 1-byte dtypes any of 1..15.
int64_t LayoutChooser::offset(nk_dtype dtype) {
  if (!misaligned_) return 0;
  const int64_t per16 = 16 / static_cast<int64_t>(normkit::host_dtype_size(dtype));
  return 1 + static_cast<int64_t>(rng_.below(static_cast<uint64_t>(per16 - 1)));
}

}  // namespace nktool
