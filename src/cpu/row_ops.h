// Row-level building blocks of the CPU backend: convert a row between its dtype and a float32
// scratch array, and the two float32 reductions (sum of squares, dot product). Loops are plain
// so the compiler can vectorize them; the reductions use a fixed number of partial sums
// combined in a fixed order, so results depend only on the data and `n`.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/dtype_host.h"
#include "common/error.h"

namespace normkit::cpu {

[[noreturn]] inline void fail_dtype(const char* where, nk_dtype dtype) {
  throw Error(NK_ERROR_INTERNAL, std::string("cpu backend: ") + where + ": unexpected dtype " +
                                     std::to_string(static_cast<int>(dtype)));
}

// out[0..n) = row `row` (elements [row * stride, row * stride + n)) of `base`, as float32.
inline void load_row(const void* base, nk_dtype dtype, int64_t row, int64_t stride, int64_t n,
                     float* out) {
  const int64_t first = row * stride;
  switch (dtype) {
    case NK_FLOAT32:
      std::memcpy(out, static_cast<const float*>(base) + first, static_cast<size_t>(n) * 4);
      return;
    case NK_BFLOAT16: {
      const uint16_t* in = static_cast<const uint16_t*>(base) + first;
      for (int64_t j = 0; j < n; ++j) out[j] = bf16_bits_to_float(in[j]);
      return;
    }
    case NK_FLOAT16: {
      const uint16_t* in = static_cast<const uint16_t*>(base) + first;
      for (int64_t j = 0; j < n; ++j) out[j] = half_bits_to_float(in[j]);
      return;
    }
    default: break;  // the 8-bit dtypes are never rows of float data
  }
  fail_dtype("load_row", dtype);
}

// Row `row` of `base` = in[0..n) rounded (nearest even) to `dtype`.
inline void store_row(void* base, nk_dtype dtype, int64_t row, int64_t stride, int64_t n,
                      const float* in) {
  const int64_t first = row * stride;
  switch (dtype) {
    case NK_FLOAT32:
      std::memcpy(static_cast<float*>(base) + first, in, static_cast<size_t>(n) * 4);
      return;
    case NK_BFLOAT16: {
      uint16_t* out = static_cast<uint16_t*>(base) + first;
      for (int64_t j = 0; j < n; ++j) out[j] = float_to_bf16_bits(in[j]);
      return;
    }
    case NK_FLOAT16: {
      uint16_t* out = static_cast<uint16_t*>(base) + first;
      for (int64_t j = 0; j < n; ++j) out[j] = float_to_half_bits(in[j]);
      return;
    }
    default: break;  // the 8-bit dtypes are never rows of float data
  }
  fail_dtype("store_row", dtype);
}

// v[0..n) = v rounded to `dtype` (and widened back), as storing and reloading would give.
inline void round_row(float* v, int64_t n, nk_dtype dtype) {
  switch (dtype) {
    case NK_FLOAT32: return;
    case NK_BFLOAT16:
      for (int64_t j = 0; j < n; ++j) v[j] = bf16_bits_to_float(float_to_bf16_bits(v[j]));
      return;
    case NK_FLOAT16:
      for (int64_t j = 0; j < n; ++j) v[j] = half_bits_to_float(float_to_half_bits(v[j]));
      return;
    default: break;  // the 8-bit dtypes are never rows of float data
  }
  fail_dtype("round_row", dtype);
}

// Reductions: kLanes independent partial sums (enough to fill a 512-bit vector) over blocks of
// kBlock elements; block totals are then added in order. Float32 rounding error grows like
// kBlock / kLanes + n / kBlock instead of n.
constexpr int kLanes = 16;
constexpr int64_t kBlock = 1024;

inline float combine_lanes(float* acc) {
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  }
  return acc[0];
}

// sum over j of f(j) for j in [begin, end), end - begin <= kBlock, with kLanes partial sums.
template <typename Term>
inline float block_sum(int64_t begin, int64_t end, Term term) {
  float acc[kLanes] = {};
  int64_t j = begin;
  for (; j + kLanes <= end; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) acc[l] += term(j + l);
  }
  for (int l = 0; j < end; ++j, ++l) acc[l] += term(j);
  return combine_lanes(acc);
}

template <typename Term>
inline float blocked_sum(int64_t n, Term term) {
  float total = 0.0f;
  for (int64_t b = 0; b < n; b += kBlock) total += block_sum(b, std::min(n, b + kBlock), term);
  return total;
}

inline float sum_squares(const float* v, int64_t n) {
  return blocked_sum(n, [v](int64_t j) { return v[j] * v[j]; });
}

inline float dot(const float* a, const float* b, int64_t n) {
  return blocked_sum(n, [a, b](int64_t j) { return a[j] * b[j]; });
}

// The per-column scale w_eff of the documented semantics, in float32: weight, 1 + weight when
// zero_centered, or all ones when weight is NULL.
inline std::vector<float> effective_weight(const void* weight, nk_dtype dtype, int64_t hidden,
                                           bool zero_centered) {
  std::vector<float> w(static_cast<size_t>(hidden), 1.0f);
  if (!weight) return w;
  load_row(weight, dtype, 0, 0, hidden, w.data());
  if (zero_centered) {
    for (float& v : w) v = 1.0f + v;
  }
  return w;
}

}  // namespace normkit::cpu
