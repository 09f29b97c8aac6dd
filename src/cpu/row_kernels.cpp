// The CPU backend's per-row work (row_kernels.h): the loops of rms_norm_fwd.cpp and
// rms_norm_bwd.cpp, with the row helpers of row_ops.h inlined into each clone.
#include "cpu/row_kernels.h"

#include <array>
#include <cmath>
#include <type_traits>
#include <utility>

#include "cpu/row_ops.h"

namespace normkit::cpu {
namespace {

// fwd_row storing y, from x (and residual) to y with no float32 copy of the row: the residual
// sum first (rounded to x's dtype as residual_out stores it), then two passes over x or
// residual_out, its sum of squares and the output. The same float operations in the same order
// as the scratch path, so the same bits (0.63-0.93x its time, 0.59-0.82x with a residual); y and
// residual_out may each be x or residual itself (each element is read before it is written,
// and both inputs are read whole before y is written). Inlined into each clone of
// fwd_row_direct.
template <nk_dtype XD, nk_dtype YD>
__attribute__((always_inline)) inline float direct_row(const nk_rms_norm_fwd_args& a,
                                                       const float* w, const float* bias,
                                                       int64_t r) {
  const int64_t H = a.hidden;
  const RowElement<XD>* s = static_cast<const RowElement<XD>*>(a.x) + r * a.x_row_stride;
  auto* y = static_cast<RowElement<YD>*>(a.y) + r * a.y_row_stride;
  if (a.residual) {
    const auto* residual =
        static_cast<const RowElement<XD>*>(a.residual) + r * a.residual_row_stride;
    auto* residual_out =
        static_cast<RowElement<XD>*>(a.residual_out) + r * a.residual_out_row_stride;
    for_each_chunk(H, [&](int64_t j0, int64_t m) {
      const ReadChunk<XD> sc(s, j0, m), rc(residual, j0, m);
      WriteChunk<XD> out(residual_out, j0, m);
      for (int64_t k = 0; k < m; ++k) out.set(k, sc[k] + rc[k]);
      out.commit();
    });
    s = residual_out;  // (what the backward sees: the sum as stored)
  }
  const float mean_square =
      blocked_row_sum<XD>(s, H, [](float v) { return v * v; }) / static_cast<float>(H);
  const float rstd = 1.0f / std::sqrt(mean_square + a.eps);
  const auto* next_x = next_row<XD>(a.x, r, a.rows, a.x_row_stride);
  const auto* next_residual = next_row<XD>(a.residual, r, a.rows, a.residual_row_stride);
  for_each_chunk(H, [&](int64_t j0, int64_t m) {
    prefetch_chunk<XD>(next_x, j0, m);
    prefetch_chunk<XD>(next_residual, j0, m);
    const ReadChunk<XD> sc(s, j0, m);
    WriteChunk<YD> out(y, j0, m);
    const float* wc = w + j0;
    if (bias) {
      const float* bc = bias + j0;
      for (int64_t k = 0; k < m; ++k) out.set(k, sc[k] * rstd * wc[k] + bc[k]);
    } else {
      for (int64_t k = 0; k < m; ++k) out.set(k, sc[k] * rstd * wc[k]);
    }
    out.commit();
  });
  return rstd;
}

// dx of row r from its x, dy and the mean of its products g * xhat (the second pass).
template <nk_dtype XD, nk_dtype DYD>
__attribute__((always_inline)) inline void direct_dx_row(const nk_rms_norm_bwd_args& a,
                                                         const float* w, int64_t r,
                                                         float mean_gx) {
  const int64_t H = a.hidden;
  const float rstd = a.rstd[r];
  const auto* x = static_cast<const RowElement<XD>*>(a.x) + r * a.x_row_stride;
  const auto* dy = static_cast<const RowElement<DYD>*>(a.dy) + r * a.dy_row_stride;
  auto* dx = static_cast<RowElement<XD>*>(a.dx) + r * a.dx_row_stride;
  const auto* dres = a.dresidual_out ? static_cast<const RowElement<XD>*>(a.dresidual_out) +
                                           r * a.dresidual_out_row_stride
                                     : nullptr;
  for_each_chunk(H, [&](int64_t j0, int64_t m) {
    const ReadChunk<XD> xc(x, j0, m);
    const ReadChunk<DYD> dyc(dy, j0, m);
    const float* wc = w + j0;
    const auto dx_of = [&](int64_t k) {
      const float xhat = xc[k] * rstd;
      const float g = dyc[k] * wc[k];
      return rstd * (g - xhat * mean_gx);
    };
    BufferedWriteChunk<XD> out(dx, j0, m);
    if (dres) {
      const ReadChunk<XD> rc(dres, j0, m);
      for (int64_t k = 0; k < m; ++k) out.set(k, rc[k] + dx_of(k));
    } else {
      for (int64_t k = 0; k < m; ++k) out.set(k, dx_of(k));
    }
    out.commit();
  });
}

// ReadChunk of elements [j0, j0 + m) of each of ROWS rows, constructed in place.
template <nk_dtype D, size_t... I>
__attribute__((always_inline)) inline std::array<ReadChunk<D>, sizeof...(I)> read_chunks(
    const RowElement<D>* const* rows, int64_t j0, int64_t m, std::index_sequence<I...>) {
  return {ReadChunk<D>(rows[I], j0, m)...};
}

// bwd_row of ROWS consecutive rows from r (1, or 2 where a chunk has them: bwd_row_pair), of
// dtypes XD (x, dx, dresidual_out) and DYD (dy), adding into pdw and pdb where DW and DB: a
// first pass over the rows, xhat = x * rstd and g = dy * w with the column sums and each row's
// mean of g * xhat, then each row's dx from both again. No float32 copy of x or dy (0.55-0.75x
// the time of loading both into float32 scratch first) nor of the products g * xhat
// (0.75-0.93x the time of storing them for blocked_sum); each column's sums loaded and stored
// once for both rows of a pair (0.87-0.93x the time of two single rows; 2026-11-27). The same
// float operations in the same order whatever ROWS (a column's terms added row by row), so the
// same bits. dx may be x, dy or dresidual_out itself: each chunk is read before it is written.
template <nk_dtype XD, nk_dtype DYD, bool DW, bool DB, int ROWS>
__attribute__((always_inline)) inline void direct_bwd_rows(const nk_rms_norm_bwd_args& a,
                                                           const float* w, int64_t r, float* pdw,
                                                           float* pdb) {
  const int64_t H = a.hidden;
  float rstd[ROWS];
  const RowElement<XD>* x[ROWS];
  const RowElement<DYD>* dy[ROWS];
  for (int q = 0; q < ROWS; ++q) {
    rstd[q] = a.rstd[r + q];
    x[q] = static_cast<const RowElement<XD>*>(a.x) + (r + q) * a.x_row_stride;
    dy[q] = static_cast<const RowElement<DYD>*>(a.dy) + (r + q) * a.dy_row_stride;
  }
  // The products g * xhat summed as blocked_sum sums them, without storing them: element j
  // into lane j % kLanes (chunks, and so blocks, start at multiples of kLanes), the lanes
  // combined at the end of each block of kBlock (a whole number of chunks) and the blocks'
  // totals added in order.
  static_assert(kBlock % kChunk == 0 && kChunk % kLanes == 0, "chunks tile blocks and lanes");
  float lanes[ROWS][kLanes] = {};
  float total_gx[ROWS] = {};
  for_each_chunk(H, [&](int64_t j0, int64_t m) {
    const auto xc = read_chunks<XD>(x, j0, m, std::make_index_sequence<ROWS>{});
    const auto dyc = read_chunks<DYD>(dy, j0, m, std::make_index_sequence<ROWS>{});
    auto add = [&](int64_t k, int l) {
      const int64_t j = j0 + k;
      float xhat[ROWS], d[ROWS];
      for (int q = 0; q < ROWS; ++q) {
        xhat[q] = xc[q][k] * rstd[q];
        d[q] = dyc[q][k];
      }
      if constexpr (DW) {
        float sum = pdw[j];
        for (int q = 0; q < ROWS; ++q) sum += d[q] * xhat[q];
        pdw[j] = sum;
      }
      if constexpr (DB) {
        float sum = pdb[j];
        for (int q = 0; q < ROWS; ++q) sum += d[q];
        pdb[j] = sum;
      }
      for (int q = 0; q < ROWS; ++q) lanes[q][l] += (d[q] * w[j]) * xhat[q];
    };
    int64_t k = 0;
    for (; k + kLanes <= m; k += kLanes) {
      for (int l = 0; l < kLanes; ++l) add(k + l, l);
    }
    for (int l = 0; k < m; ++k, ++l) add(k, l);  // (the row's last chunk only)
    if ((j0 + m) % kBlock == 0 || j0 + m == H) {
      for (int q = 0; q < ROWS; ++q) {
        total_gx[q] += combine_lanes(lanes[q]);
        for (float& v : lanes[q]) v = 0.0f;
      }
    }
  });
  for (int q = 0; q < ROWS; ++q) {
    direct_dx_row<XD, DYD>(a, w, r + q, total_gx[q] / static_cast<float>(H));
  }
}

// f(dw, db) with dw and db std::bool_constant: whether pdw and pdb are given, as compile-time
// values (so that the row loops test neither).
template <typename F>
__attribute__((always_inline)) inline void with_sums(const float* pdw, const float* pdb, F f) {
  if (pdw && pdb) {
    f(std::true_type{}, std::true_type{});
  } else if (pdw) {
    f(std::true_type{}, std::false_type{});
  } else if (pdb) {
    f(std::false_type{}, std::true_type{});
  } else {
    f(std::false_type{}, std::false_type{});
  }
}

// direct_bwd_rows of ROWS rows from r, compiled for the call's dtypes and column sums.
template <int ROWS>
__attribute__((always_inline)) inline void bwd_rows(const nk_rms_norm_bwd_args& a,
                                                    const float* w, int64_t r, float* pdw,
                                                    float* pdb, const char* where) {
  with_row_dtype(a.x_dtype, where, [&](auto xd) {
    with_row_dtype(a.dy_dtype, where, [&](auto dyd) {
      with_sums(pdw, pdb, [&](auto dw, auto db) {
        direct_bwd_rows<decltype(xd)::value, decltype(dyd)::value, decltype(dw)::value,
                        decltype(db)::value, ROWS>(a, w, r, pdw, pdb);
      });
    });
  });
}

}  // namespace

// (flatten: with its 36 forms inlined the function outgrows GCC's inlining limits, and calls
// left in its loops, to the element conversions among them, kept them from vectorizing.)
NK_CPU_ROW_CLONES __attribute__((flatten))
void bwd_row_pair(const nk_rms_norm_bwd_args& a, const float* w, int64_t r, float* pdw,
                  float* pdb) {
  bwd_rows<2>(a, w, r, pdw, pdb, "bwd_row_pair");
}

NK_CPU_ROW_CLONES __attribute__((flatten))
void bwd_row(const nk_rms_norm_bwd_args& a, const float* w, int64_t r, float* pdw,
             float* pdb) {
  bwd_rows<1>(a, w, r, pdw, pdb, "bwd_row");
}

NK_CPU_ROW_CLONES __attribute__((flatten))
float fwd_row_direct(const nk_rms_norm_fwd_args& a, const float* w, const float* bias,
                     int64_t r) {
  return with_row_dtype(a.x_dtype, "fwd_row_direct", [&](auto xd) {
    return with_row_dtype(a.y_dtype, "fwd_row_direct", [&](auto yd) {
      return direct_row<decltype(xd)::value, decltype(yd)::value>(a, w, bias, r);
    });
  });
}

NK_CPU_ROW_CLONES
float fwd_row(const nk_rms_norm_fwd_args& a, const float* w, const float* bias,
              bool fold_rstd_last, int64_t r, float* s, float* t) {
  const int64_t H = a.hidden;
  load_row(a.x, a.x_dtype, r, a.x_row_stride, H, s);
  if (a.residual) {
    load_row(a.residual, a.x_dtype, r, a.residual_row_stride, H, t);
    for (int64_t j = 0; j < H; ++j) s[j] += t[j];
    // Normalize what is stored in residual_out, as the backward pass will see it.
    round_row(s, H, a.x_dtype);
    store_row(a.residual_out, a.x_dtype, r, a.residual_out_row_stride, H, s);
  }
  const float mean_square = sum_squares(s, H) / static_cast<float>(H);
  const float rstd = 1.0f / std::sqrt(mean_square + a.eps);
  if (fold_rstd_last) {  // NK_QUANT_TOKEN without bias: v = (s * w_eff) * rstd
    for (int64_t j = 0; j < H; ++j) t[j] = s[j] * w[j] * rstd;
  } else {
    for (int64_t j = 0; j < H; ++j) t[j] = s[j] * rstd * w[j];
  }
  if (bias) {
    for (int64_t j = 0; j < H; ++j) t[j] += bias[j];
  }
  return rstd;
}

NK_CPU_ROW_CLONES
void add_row(float* acc, const float* slice, int64_t n) {
  for (int64_t j = 0; j < n; ++j) acc[j] += slice[j];
}

}  // namespace normkit::cpu
