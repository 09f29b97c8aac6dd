// The CPU backend's per-row work, compiled for several x86-64 levels at once (AVX-512, AVX2,
// baseline) and picked at load time by the CPU the library runs on (NK_CPU_ROW_CLONES). The
// float operations are the same, one by one, in every version (the build turns floating-point
// contraction off), so the result bits do not depend on which version runs.
#pragma once

#include <cstdint>

#include "normkit/normkit.h"

// GCC 12+ on x86-64 Linux (ifunc): one clone per level; elsewhere a single version.
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && !defined(__clang__) && \
    __GNUC__ >= 12
#define NK_CPU_ROW_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define NK_CPU_ROW_CLONES_BUILT 1
#else
#define NK_CPU_ROW_CLONES
#endif

namespace normkit::cpu {

// The quantized forward's row r: s = x (+ residual, rounded to x's dtype and stored to
// residual_out), t = the output row in float32 for the quantizer, as rms_norm_fwd documents (w:
// the effective weight; bias or null; fold_rstd_last: v = (s * w) * rstd, NK_QUANT_TOKEN's order
// without bias). Returns the row's rstd.
float fwd_row(const nk_rms_norm_fwd_args& a, const float* w, const float* bias,
              bool fold_rstd_last, int64_t r, float* s, float* t);

// Forward of row r, storing y (and residual_out), straight from x and residual (no float32 copy
// of the row): the bits fwd_row stores, fewer passes over memory. Returns the row's rstd.
float fwd_row_direct(const nk_rms_norm_fwd_args& a, const float* w, const float* bias,
                     int64_t r);

// Backward of row r: dx stored, dy * xhat added into pdw and dy into pdb (either may be null),
// from x and dy as stored. dx may be the same view as x, dy or dresidual_out.
void bwd_row(const nk_rms_norm_bwd_args& a, const float* w, int64_t r, float* pdw, float* pdb);

// bwd_row of rows r and r + 1 at once (the same bits as two bwd_row calls): the column sums
// loaded and stored once for both rows.
void bwd_row_pair(const nk_rms_norm_bwd_args& a, const float* w, int64_t r, float* pdw,
                  float* pdb);

// acc[0..n) += slice[0..n).
void add_row(float* acc, const float* slice, int64_t n);

}  // namespace normkit::cpu
