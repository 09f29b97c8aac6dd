// The CPU backend's per-row work (row_kernels.h): the loops of rms_norm_fwd.cpp and
// rms_norm_bwd.cpp, with the row helpers of row_ops.h inlined into each clone.
#include "cpu/row_kernels.h"

#include <cmath>
#include <type_traits>

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
    WriteChunk<XD> out(dx, j0, m);
    if (dres) {
      const ReadChunk<XD> rc(dres, j0, m);
      for (int64_t k = 0; k < m; ++k) out.set(k, rc[k] + dx_of(k));
    } else {
      for (int64_t k = 0; k < m; ++k) out.set(k, dx_of(k));
    }
    out.commit();
  });
}

// bwd_row of dtypes XD (x, dx, dresidual_out) and DYD (dy), adding into pdw and pdb where DW
// and DB: two passes over the row, xhat = x * rstd and g = dy * w with the column sums and the
// row's mean of g * xhat, then dx from both again, with no float32 copy of x or dy (0.55-0.75x
// the time of loading both into float32 scratch first; the same float operations in the same
// order, so the same bits) nor of the products g * xhat (0.85-0.92x the time of storing them
// for blocked_sum, 2026-11-27). dx may be x, dy or dresidual_out itself: each chunk is read
// before it is written. (bwd_row_pair below takes two rows at once where a chunk has them.)
template <nk_dtype XD, nk_dtype DYD, bool DW, bool DB>
__attribute__((always_inline)) inline void direct_bwd_row(const nk_rms_norm_bwd_args& a,
                                                          const float* w, int64_t r, float* pdw,
                                                          float* pdb) {
  const int64_t H = a.hidden;
  const float rstd = a.rstd[r];
  const auto* x = static_cast<const RowElement<XD>*>(a.x) + r * a.x_row_stride;
  const auto* dy = static_cast<const RowElement<DYD>*>(a.dy) + r * a.dy_row_stride;
  // The products g * xhat summed as blocked_sum sums them, without storing them: element j
  // into lane j % kLanes (chunks, and so blocks, start at multiples of kLanes), the lanes
  // combined at the end of each block of kBlock (a whole number of chunks) and the blocks'
  // totals added in order.
  static_assert(kBlock % kChunk == 0 && kChunk % kLanes == 0, "chunks tile blocks and lanes");
  float lanes[kLanes] = {};
  float total_gx = 0.0f;
  for_each_chunk(H, [&](int64_t j0, int64_t m) {
    const ReadChunk<XD> xc(x, j0, m);
    const ReadChunk<DYD> dyc(dy, j0, m);
    auto add = [&](int64_t k, int l) {
      const int64_t j = j0 + k;
      const float xhat = xc[k] * rstd;
      const float d = dyc[k];
      if constexpr (DW) pdw[j] += d * xhat;
      if constexpr (DB) pdb[j] += d;
      lanes[l] += (d * w[j]) * xhat;
    };
    int64_t k = 0;
    for (; k + kLanes <= m; k += kLanes) {
      for (int l = 0; l < kLanes; ++l) add(k + l, l);
    }
    for (int l = 0; k < m; ++k, ++l) add(k, l);  // (the row's last chunk only)
    if ((j0 + m) % kBlock == 0 || j0 + m == H) {
      total_gx += combine_lanes(lanes);
      for (float& v : lanes) v = 0.0f;
    }
  });
  direct_dx_row<XD, DYD>(a, w, r, total_gx / static_cast<float>(H));
}

// Rows r and r + 1 at once: their first passes in one loop, each column's sums added row r's
// term first, then row r + 1's (the order of two bwd_row calls, so the same bits), one load
// and store of the sums for both; then each row's dx.
template <nk_dtype XD, nk_dtype DYD, bool DW, bool DB>
__attribute__((always_inline)) inline void direct_bwd_row_pair(const nk_rms_norm_bwd_args& a,
                                                               const float* w, int64_t r,
                                                               float* pdw, float* pdb) {
  const int64_t H = a.hidden;
  const float rstd0 = a.rstd[r], rstd1 = a.rstd[r + 1];
  const auto* x0 = static_cast<const RowElement<XD>*>(a.x) + r * a.x_row_stride;
  const auto* x1 = x0 + a.x_row_stride;
  const auto* dy0 = static_cast<const RowElement<DYD>*>(a.dy) + r * a.dy_row_stride;
  const auto* dy1 = dy0 + a.dy_row_stride;
  float lanes0[kLanes] = {}, lanes1[kLanes] = {};
  float total0 = 0.0f, total1 = 0.0f;
  for_each_chunk(H, [&](int64_t j0, int64_t m) {
    const ReadChunk<XD> xc0(x0, j0, m), xc1(x1, j0, m);
    const ReadChunk<DYD> dyc0(dy0, j0, m), dyc1(dy1, j0, m);
    auto add = [&](int64_t k, int l) {
      const int64_t j = j0 + k;
      const float xhat0 = xc0[k] * rstd0, xhat1 = xc1[k] * rstd1;
      const float d0 = dyc0[k], d1 = dyc1[k];
      if constexpr (DW) {
        float sum = pdw[j];
        sum += d0 * xhat0;
        sum += d1 * xhat1;
        pdw[j] = sum;
      }
      if constexpr (DB) {
        float sum = pdb[j];
        sum += d0;
        sum += d1;
        pdb[j] = sum;
      }
      lanes0[l] += (d0 * w[j]) * xhat0;
      lanes1[l] += (d1 * w[j]) * xhat1;
    };
    int64_t k = 0;
    for (; k + kLanes <= m; k += kLanes) {
      for (int l = 0; l < kLanes; ++l) add(k + l, l);
    }
    for (int l = 0; k < m; ++k, ++l) add(k, l);
    if ((j0 + m) % kBlock == 0 || j0 + m == H) {
      total0 += combine_lanes(lanes0);
      total1 += combine_lanes(lanes1);
      for (float& v : lanes0) v = 0.0f;
      for (float& v : lanes1) v = 0.0f;
    }
  });
  direct_dx_row<XD, DYD>(a, w, r, total0 / static_cast<float>(H));
  direct_dx_row<XD, DYD>(a, w, r + 1, total1 / static_cast<float>(H));
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

}  // namespace

NK_CPU_ROW_CLONES __attribute__((flatten))
void bwd_row_pair(const nk_rms_norm_bwd_args& a, const float* w, int64_t r, float* pdw,
                  float* pdb) {
  with_row_dtype(a.x_dtype, "bwd_row_pair", [&](auto xd) {
    with_row_dtype(a.dy_dtype, "bwd_row_pair", [&](auto dyd) {
      with_sums(pdw, pdb, [&](auto dw, auto db) {
        direct_bwd_row_pair<decltype(xd)::value, decltype(dyd)::value, decltype(dw)::value,
                            decltype(db)::value>(a, w, r, pdw, pdb);
      });
    });
  });
}

// (flatten: with its 36 forms inlined the function outgrows GCC's inlining limits, and calls
// left in its loops, to the element conversions among them, kept them from vectorizing.)
NK_CPU_ROW_CLONES __attribute__((flatten))
void bwd_row(const nk_rms_norm_bwd_args& a, const float* w, int64_t r, float* pdw,
             float* pdb) {
  with_row_dtype(a.x_dtype, "bwd_row", [&](auto xd) {
    with_row_dtype(a.dy_dtype, "bwd_row", [&](auto dyd) {
      with_sums(pdw, pdb, [&](auto dw, auto db) {
        direct_bwd_row<decltype(xd)::value, decltype(dyd)::value, decltype(dw)::value,
                       decltype(db)::value>(a, w, r, pdw, pdb);
      });
    });
  });
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
