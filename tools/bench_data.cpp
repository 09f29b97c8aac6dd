#include "bench_data.h"

#include <algorithm>

#include "common/dtype_host.h"
#include "random.h"

namespace nktool {

RandomPool::RandomPool(nk_dtype dtype, size_t elements, uint64_t seed)
    : dtype_(dtype),
      elements_(std::max<size_t>(elements, 1)),
      element_bytes_(nk_dtype_size(dtype)),
      bytes_(elements_ * element_bytes_) {
  Random rng(seed);
  for (size_t i = 0; i < elements_; ++i) {
    normkit::store_from_float(bytes_.data(), dtype_, static_cast<int64_t>(i),
                              rng.signed_magnitude(0.05f, 2.0f));
  }
}

void RandomPool::tile_into(size_t elements, size_t start,
                           const std::function<void(size_t, const void*, size_t)>& copy) const {
  size_t done = 0;
  size_t from = start % elements_;
  while (done < elements) {
    const size_t n = std::min(elements - done, elements_ - from);
    copy(done * element_bytes_, bytes_.data() + from * element_bytes_, n * element_bytes_);
    done += n;
    from = 0;
  }
}

std::vector<unsigned char> weight_near_one(nk_dtype dtype, int64_t hidden, uint64_t seed) {
  std::vector<unsigned char> w(static_cast<size_t>(hidden) * nk_dtype_size(dtype));
  Random rng(seed);
  for (int64_t j = 0; j < hidden; ++j) {
    normkit::store_from_float(w.data(), dtype, j, 1.0f + rng.uniform(-0.1f, 0.1f));
  }
  return w;
}

std::vector<unsigned char> bench_weight(const BenchConfig& c, int64_t hidden, uint64_t seed) {
  if (!c.zero_centered) return weight_near_one(c.weight_dtype, hidden, seed);
  std::vector<unsigned char> w(static_cast<size_t>(hidden) * nk_dtype_size(c.weight_dtype));
  Random rng(seed);
  for (int64_t j = 0; j < hidden; ++j) {
    normkit::store_from_float(w.data(), c.weight_dtype, j, rng.uniform(-0.1f, 0.1f));
  }
  return w;
}

std::vector<unsigned char> bench_bias(const BenchConfig& c, int64_t hidden, uint64_t seed) {
  std::vector<unsigned char> b(static_cast<size_t>(hidden) * nk_dtype_size(c.weight_dtype));
  Random rng(seed);
  for (int64_t j = 0; j < hidden; ++j) {
    normkit::store_from_float(b.data(), c.weight_dtype, j, rng.signed_magnitude(0.05f, 2.0f));
  }
  return b;
}

nk_rms_norm_fwd_args bench_fwd_args(const Shape& s, const BenchConfig& c, const BenchPointers& p) {
  nk_rms_norm_fwd_args a;
  nk_rms_norm_fwd_args_init(&a);
  a.rows = s.rows;
  a.hidden = s.hidden;
  a.x = p.x;
  a.x_dtype = c.dtype;
  if (c.residual) {
    a.residual = p.residual;
    a.residual_out = p.residual_out;
  }
  a.weight = c.weight ? p.weight : nullptr;
  a.weight_dtype = c.weight_dtype;
  a.bias = c.bias ? p.bias : nullptr;
  a.zero_centered = c.zero_centered ? 1 : 0;
  a.eps = c.eps;
  a.y = p.y;
  a.y_dtype = y_dtype(c);
  a.rstd = p.rstd;
  if (c.quant != NK_QUANT_NONE) {
    a.quant = c.quant;
    a.quant_block = c.quant == NK_QUANT_BLOCK ? c.quant_block : 0;
    a.scale = c.quant == NK_QUANT_TENSOR ? p.scale : nullptr;
    a.scales = p.scales;
    a.amax = p.amax;
    a.y_t = c.transposed ? p.y_t : nullptr;
  }
  return a;
}

nk_rms_norm_bwd_args bench_bwd_args(const Shape& s, const BenchConfig& c, const BenchPointers& p) {
  nk_rms_norm_bwd_args a;
  nk_rms_norm_bwd_args_init(&a);
  a.rows = s.rows;
  a.hidden = s.hidden;
  a.dy = p.dy;
  a.dy_dtype = c.dtype;
  a.x = c.residual ? p.residual_out : p.x;
  a.x_dtype = c.dtype;
  a.rstd = p.rstd;
  a.weight = c.weight ? p.weight : nullptr;
  a.weight_dtype = c.weight_dtype;
  a.zero_centered = c.zero_centered ? 1 : 0;
  if (c.residual) a.dresidual_out = p.residual;
  a.dx = p.dx;
  a.dweight = c.weight ? p.dweight : nullptr;
  a.dbias = c.bias ? p.dbias : nullptr;
  a.workspace = p.workspace;
  a.workspace_bytes = p.workspace_bytes;
  return a;
}

}  // namespace nktool
