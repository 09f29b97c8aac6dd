// Row-level building blocks of the CPU backend: convert a row between its dtype and a float32
// scratch array, and the float32 reductions (blocked_sum, sum of squares). Loops are plain
// so the compiler can vectorize them; the reductions use a fixed number of partial sums
// combined in a fixed order, so results depend only on the data and `n`.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "common/dtype_host.h"
#include "common/error.h"
#include "cpu/bf16_rows.h"
#include "cpu/half_rows.h"

namespace normkit::cpu {

[[noreturn]] inline void fail_dtype(const char* where, nk_dtype dtype) {
  throw Error(NK_ERROR_INTERNAL, std::string("cpu backend: ") + where + ": unexpected dtype " +
                                     std::to_string(static_cast<int>(dtype)));
}

// A row element's storage type by dtype, widened to float32 and narrowed back (nearest even).
template <nk_dtype D>
using RowElement = std::conditional_t<D == NK_FLOAT32, float, uint16_t>;

template <nk_dtype D>
inline float widen(RowElement<D> v) {
  if constexpr (D == NK_FLOAT32) return v;
  else if constexpr (D == NK_BFLOAT16) return bf16_bits_to_float(v);
  else return half_bits_to_float(v);
}

template <nk_dtype D>
inline RowElement<D> narrow(float v) {
  if constexpr (D == NK_FLOAT32) return v;
  else if constexpr (D == NK_BFLOAT16) return float_to_bf16_bits(v);
  else return float_to_half_bits(v);
}

// f(std::integral_constant<nk_dtype, D>{}) for the row dtype D that `dtype` names: the one
// switch from a run-time dtype to code compiled for it (`where` names the caller in the error
// for any other dtype: the 8-bit dtypes are never rows of float data).
template <typename F>
__attribute__((always_inline)) inline auto with_row_dtype(nk_dtype dtype, const char* where, F f) {
  switch (dtype) {
    case NK_FLOAT32: return f(std::integral_constant<nk_dtype, NK_FLOAT32>{});
    case NK_BFLOAT16: return f(std::integral_constant<nk_dtype, NK_BFLOAT16>{});
    case NK_FLOAT16: return f(std::integral_constant<nk_dtype, NK_FLOAT16>{});
    default: fail_dtype(where, dtype);
  }
}

// ---- rows in chunks ----
// The row kernels walk a row in chunks of kChunk elements. A float16 chunk is converted whole
// into float32 scratch on the stack (or from it, for outputs) by half_rows.h, 8 or 16 elements
// per instruction where the element-wise forms take 15-20 (the row kernels' clones cannot hold
// those instructions themselves: their baseline clone must run anywhere). The other dtypes
// convert in place, element by element, as the loop reads or writes them. (256: the fp16
// backward took 1.04-1.10x its time with chunks of 128 or 512, one thread, 2026-11-26.)
constexpr int64_t kChunk = 256;

// f(j0, m) for the chunks [j0, j0 + m) of [0, n): N elements each, the last one shorter.
template <int64_t N = kChunk, typename F>
__attribute__((always_inline)) inline void for_each_chunk(int64_t n, F f) {
  for (int64_t j0 = 0; j0 < n; j0 += N) f(j0, std::min(N, n - j0));
}

// Starts loading elements [j0, j0 + m) of `row` (dtype D; null: nothing) into the cache: the
// next row's, while this one is written, so that its first pass finds them there. (The
// hardware prefetcher starts over at each 4 KB page: rows of a few pages waited on memory at
// each; the forward of 64-128 MB took 0.74-0.79x the time with this, 2026-11-27.)
template <nk_dtype D>
__attribute__((always_inline)) inline void prefetch_chunk(const RowElement<D>* row, int64_t j0,
                                                          int64_t m) {
  if (!row) return;
  const char* bytes = reinterpret_cast<const char*>(row + j0);
  const int64_t n_bytes = m * static_cast<int64_t>(sizeof(RowElement<D>));
  for (int64_t offset = 0; offset < n_bytes; offset += 64) __builtin_prefetch(bytes + offset);
}

// Row r + 1 of `base` (dtype D, row stride `stride`), or null when r is the last of `rows`:
// what prefetch_chunk loads ahead.
template <nk_dtype D>
inline const RowElement<D>* next_row(const void* base, int64_t r, int64_t rows, int64_t stride) {
  return base && r + 1 < rows ? static_cast<const RowElement<D>*>(base) + (r + 1) * stride
                              : nullptr;
}

// Elements [j0, j0 + m) of a row of dtype D, read as float32: chunk[k] = widen<D>(row[j0 + k]).
template <nk_dtype D, int64_t N = kChunk>
class ReadChunk {
 public:
  ReadChunk(const RowElement<D>* row, int64_t j0, int64_t /*m*/) : in_(row + j0) {}
  float operator[](int64_t k) const { return widen<D>(in_[k]); }

 private:
  const RowElement<D>* in_;
};

template <int64_t N>
class ReadChunk<NK_FLOAT16, N> {
 public:
  ReadChunk(const uint16_t* row, int64_t j0, int64_t m) { halves_to_floats(row + j0, v_, m); }
  float operator[](int64_t k) const { return v_[k]; }

 private:
  float v_[N];
};

// Elements [j0, j0 + m) of a row of dtype D, written from float32: set(k, v) stores
// narrow<D>(v) at row[j0 + k], a float16 chunk all at once in commit(). Every read of the chunk's
// inputs comes before commit(), so an output may be the same view as an input.
template <nk_dtype D>
class WriteChunk {
 public:
  WriteChunk(RowElement<D>* row, int64_t j0, int64_t /*m*/) : out_(row + j0) {}
  void set(int64_t k, float v) { out_[k] = narrow<D>(v); }
  void commit() {}

 private:
  RowElement<D>* out_;
};

// (A chunk of 16-bit floats goes through float32 scratch to the whole-array conversions of
// half_rows.h and bf16_rows.h.)
template <void (*kConvert)(const float*, uint16_t*, int64_t)>
class WriteChunkOf16Bits {
 public:
  WriteChunkOf16Bits(uint16_t* row, int64_t j0, int64_t m) : out_(row + j0), m_(m) {}
  void set(int64_t k, float v) { v_[k] = v; }
  void commit() { kConvert(v_, out_, m_); }

 private:
  float v_[kChunk];
  uint16_t* out_;
  int64_t m_;
};

template <>
class WriteChunk<NK_FLOAT16> : public WriteChunkOf16Bits<floats_to_halves> {
  using WriteChunkOf16Bits::WriteChunkOf16Bits;
};

// WriteChunk, but a bfloat16 chunk too all at once in commit() (floats_to_bf16s): where the
// output is a row's last pass and its inputs sit in cache. Measured (this machine's AVX512-BF16,
// 2026-11-27, bench/cpu_ab.sh): the backward 0.80-0.97x the time with WriteChunk for dx at 1-8192
// rows of 1024-8192 columns; the forward's y 0.85-0.88x up to 32 MB but 1.04-1.12x slower from
// 64 MB and with a residual (the burst of stores at commit() waits on memory), so it keeps
// WriteChunk.
template <nk_dtype D>
class BufferedWriteChunk : public WriteChunk<D> {
  using WriteChunk<D>::WriteChunk;
};

template <>
class BufferedWriteChunk<NK_BFLOAT16> : public WriteChunkOf16Bits<floats_to_bf16s> {
  using WriteChunkOf16Bits::WriteChunkOf16Bits;
};

// out[0..n) = row `row` (elements [row * stride, row * stride + n)) of `base`, as float32.
inline void load_row(const void* base, nk_dtype dtype, int64_t row, int64_t stride, int64_t n,
                     float* out) {
  with_row_dtype(dtype, "load_row", [&](auto d) {
    constexpr nk_dtype D = decltype(d)::value;
    const RowElement<D>* in = static_cast<const RowElement<D>*>(base) + row * stride;
    if constexpr (D == NK_FLOAT16) {
      halves_to_floats(in, out, n);
    } else {
      for (int64_t j = 0; j < n; ++j) out[j] = widen<D>(in[j]);
    }
  });
}

// Row `row` of `base` = in[0..n) rounded (nearest even) to `dtype`.
inline void store_row(void* base, nk_dtype dtype, int64_t row, int64_t stride, int64_t n,
                      const float* in) {
  with_row_dtype(dtype, "store_row", [&](auto d) {
    constexpr nk_dtype D = decltype(d)::value;
    RowElement<D>* out = static_cast<RowElement<D>*>(base) + row * stride;
    if constexpr (D == NK_FLOAT16) {
      floats_to_halves(in, out, n);
    } else {
      for (int64_t j = 0; j < n; ++j) out[j] = narrow<D>(in[j]);
    }
  });
}

// v[0..n) = v rounded to `dtype` (and widened back), as storing and reloading would give.
inline void round_row(float* v, int64_t n, nk_dtype dtype) {
  with_row_dtype(dtype, "round_row", [&](auto d) {
    constexpr nk_dtype D = decltype(d)::value;
    if constexpr (D == NK_FLOAT16) {
      uint16_t h[kChunk];
      for_each_chunk(n, [&](int64_t j0, int64_t m) {
        floats_to_halves(v + j0, h, m);
        halves_to_floats(h, v + j0, m);
      });
    } else if constexpr (D == NK_BFLOAT16) {
      for (int64_t j = 0; j < n; ++j) v[j] = widen<D>(narrow<D>(v[j]));
    }
  });
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

// blocked_sum(n, j -> f(widen<D>(row[j]))), the row read chunk by chunk: a chunk is a block,
// so the terms go into the same lanes in the same order.
template <nk_dtype D, typename F>
__attribute__((always_inline)) inline float blocked_row_sum(const RowElement<D>* row, int64_t n,
                                                            F f) {
  float total = 0.0f;
  for_each_chunk<kBlock>(n, [&](int64_t j0, int64_t m) {
    const ReadChunk<D, kBlock> v(row, j0, m);
    total += block_sum(0, m, [&](int64_t k) { return f(v[k]); });
  });
  return total;
}

inline float sum_squares(const float* v, int64_t n) {
  return blocked_sum(n, [v](int64_t j) { return v[j] * v[j]; });
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
