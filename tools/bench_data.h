// Inputs for `normkit bench`: one pool of random values generated once on the host and tiled
// into every tensor (regenerating ~0.5 GB per tensor for the largest shapes would dominate the
// run), and the argument structs of the timed calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "bench_types.h"
#include "normkit/normkit.h"

namespace nktool {

class RandomPool {
 public:
  // `elements` random values of `dtype`, magnitudes in [0.05, 2) with random signs (no zeros).
  RandomPool(nk_dtype dtype, size_t elements, uint64_t seed);

  // Fills a tensor of `elements` values by calling copy(dst_offset_bytes, src, bytes) for
  // consecutive pieces of the pool, starting at pool element `start` and wrapping around.
  void tile_into(size_t elements, size_t start,
                 const std::function<void(size_t, const void*, size_t)>& copy) const;

  size_t elements() const { return elements_; }

 private:
  nk_dtype dtype_;
  size_t elements_, element_bytes_;
  std::vector<unsigned char> bytes_;
};

// A weight vector near 1 (1 + uniform(-0.1, 0.1)), as PEERS.md's inputs.
std::vector<unsigned char> weight_near_one(nk_dtype dtype, int64_t hidden, uint64_t seed);

// The benchmark's weight in c.weight_dtype: near 1, or near 0 (uniform(-0.1, 0.1)) with
// c.zero_centered, so that the scale 1 + weight is near 1 either way.
std::vector<unsigned char> bench_weight(const BenchConfig& c, int64_t hidden, uint64_t seed);

// A bias in c.weight_dtype: magnitudes in [0.05, 2) with random signs, as the pool's values.
std::vector<unsigned char> bench_bias(const BenchConfig& c, int64_t hidden, uint64_t seed);

// Pointers of one benchmarked shape (host or device, as the backend needs).
struct BenchPointers {
  void* x = nullptr;
  void* residual = nullptr;      // also dresidual_out in the backward (both read-only inputs)
  void* residual_out = nullptr;  // the backward's x when the forward fused a residual
  void* weight = nullptr;
  void* bias = nullptr;  // --bias
  void* y = nullptr;
  float* rstd = nullptr;
  void* dy = nullptr;
  void* dx = nullptr;
  void* dweight = nullptr;
  void* dbias = nullptr;  // --bias
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  // --quant
  float* scale = nullptr;  // [1] per-tensor scale
  void* scales = nullptr;  // per-row or per-block scales
  float* amax = nullptr;   // [1]
  void* y_t = nullptr;     // --transposed
};

nk_rms_norm_fwd_args bench_fwd_args(const Shape& s, const BenchConfig& c, const BenchPointers& p);
// dx and dweight (and dbias with c.bias), from the forward's input s and its rstd.
nk_rms_norm_bwd_args bench_bwd_args(const Shape& s, const BenchConfig& c, const BenchPointers& p);

}  // namespace nktool
