// The order of work in the one-grid per-tensor forward with y_t (rms_norm_fwd_quant_ticketed):
// which CTA normalizes which rows and which transposes which piece of y into y_t. Plain C++ for
// the planner and its tests, and the kernel's own decoding, so that the two cannot disagree.
//
// The grid holds two kinds of units in blockIdx order: forward units (one CTA of the forward
// plan each: rows_per_block rows) and transpose units (a band of kBandRows rows of y by
// piece_cols columns, into y_t). A band's transpose units come `lag` bands of forward units
// after the band's own forward units, so that they find the band finished (or nearly) and y
// still in L2. A transpose unit waits only for forward units of lower blockIdx: CTAs are
// dispatched in blockIdx order (CUB's single-pass scan relies on the same), so every unit it
// waits for is running or done, and none of those waits.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define NK_TICKETS_HD __host__ __device__
#else
#define NK_TICKETS_HD
#endif

namespace normkit::cuda {

// Rows of y per band: each transpose unit writes 64-byte runs of y_t (two whole sectors).
constexpr int kBandRows = 64;

// What one CTA of the grid does.
struct TicketUnit {
  bool forward = false;  // a CTA of the forward plan, else a transpose unit
  uint32_t index = 0;    // forward: which CTA of the forward plan (its rows from index *
                         // rows_per_block); transpose: the piece (its columns from index *
                         // piece_cols)
  uint32_t band = 0;     // the band it counts into (forward) or transposes
};

struct TransposeTickets {
  uint32_t bands = 0;            // ceil(rows / kBandRows)
  uint32_t units_per_band = 0;   // forward CTAs per band: kBandRows / rows_per_block
  uint32_t pieces_per_band = 0;  // transpose units per band: ceil(hidden / piece_cols)
  uint32_t piece_cols = 0;       // columns per transpose unit: the CTA's threads x slices
  uint32_t lag = 0;              // bands of forward units between a band's own and its
                                 // transposes (0 to bands)
  uint32_t forward_units = 0;    // the forward plan's grid; units past it (in the last band)
                                 // only count
  uint32_t grid = 0;             // bands * (units_per_band + pieces_per_band)

  // The unit of CTA b (b < grid): first lag bands of forward units, then per band k the forward
  // units of band k + lag and the transposes of band k, then the last lag bands' transposes.
  // 32-bit divisions: a 64-bit one is a called routine of ~70 instructions on the GPU.
  NK_TICKETS_HD TicketUnit unit(uint32_t b) const {
    const uint32_t head = lag * units_per_band;
    TicketUnit u;
    if (b < head) {
      u.forward = true;
      u.index = b;
      u.band = b / units_per_band;
      return u;
    }
    const uint32_t group = units_per_band + pieces_per_band;
    const uint32_t m = b - head, k = m / group, r = m - k * group;
    if (k < bands - lag) {
      u.forward = r < units_per_band;
      u.index = u.forward ? (k + lag) * units_per_band + r : r - units_per_band;
      u.band = u.forward ? k + lag : k;
      return u;
    }
    const uint32_t t = m - (bands - lag) * group, q = t / pieces_per_band;
    u.index = t - q * pieces_per_band;
    u.band = bands - lag + q;
    return u;
  }
};

// The ticketed grid of a forward plan of `threads` threads per CTA (a multiple of 32) and
// `rows_per_block` rows per CTA (dividing kBandRows) over `forward_grid` CTAs, transpose units
// of `slices` x threads columns; `resident_ctas` the CTAs the device runs at once,
// `lag_percent` how much of their rows the lag covers. grid 0 where the counts pass 32 bits.
inline TransposeTickets plan_transpose_tickets(int64_t rows, int64_t hidden, int threads,
                                               int slices, int rows_per_block,
                                               int64_t forward_grid, int64_t resident_ctas,
                                               int lag_percent) {
  TransposeTickets t;
  const int64_t bands = (rows + kBandRows - 1) / kBandRows;
  const int64_t units = kBandRows / rows_per_block;
  const int64_t piece_cols = int64_t(threads) * slices;
  const int64_t pieces = (hidden + piece_cols - 1) / piece_cols;
  const int64_t grid = bands * (units + pieces);
  if (grid > 0x7fffffff || forward_grid > bands * units) return t;
  const int64_t rows_in_flight = resident_ctas * rows_per_block * lag_percent / 100;
  const int64_t lag = (rows_in_flight + kBandRows - 1) / kBandRows;
  t.bands = static_cast<uint32_t>(bands);
  t.units_per_band = static_cast<uint32_t>(units);
  t.pieces_per_band = static_cast<uint32_t>(pieces);
  t.piece_cols = static_cast<uint32_t>(piece_cols);
  t.lag = static_cast<uint32_t>(lag < bands ? lag : bands);
  t.forward_units = static_cast<uint32_t>(forward_grid);
  t.grid = static_cast<uint32_t>(grid);
  return t;
}

}  // namespace normkit::cuda
