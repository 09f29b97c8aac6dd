// Shared-memory layout of the column-owning backward (rms_norm_bwd_columns): used by the
// planner (plain C++, to check that a tile fits) and by the kernel (to find its arrays), so the
// two cannot disagree.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define NK_HOST_DEVICE __host__ __device__
#else
#define NK_HOST_DEVICE
#endif

namespace normkit::cuda {

// Byte offsets into the CTA's dynamic shared memory (each 16-byte aligned). A CTA owns `cols`
// columns of every one of `rows` rows. Each staged operand (x, dy, and dresidual_out when
// given) has one slot per row; a slot holds the row's segment at its global address modulo 16,
// so that the segment's 16-byte aligned body lands on a 16-byte boundary for the bulk copy.
struct ColumnsLayout {
  int64_t barrier = 0;      // one mbarrier (8 bytes)
  int64_t weight = 0;       // float[cols]: the scale of each column (w, 1 + w or 1)
  int64_t rstd = 0;         // float[rows]
  int64_t dots = 0;         // float[ranks][dot_stride(rows)]: each cluster CTA's part of each
                            // row's dot product (a rank's parts are copied as one 16-byte
                            // multiple)
  int64_t mean = 0;         // float[rows]: the row's dot product over hidden
  int64_t partials = 0;     // float[outputs][groups][cols]: row groups' dweight/dbias sums
  int64_t stage[3] = {};    // slots of x, dy, dresidual_out
  int64_t slot_bytes[3] = {};
  int64_t total = 0;

  static NK_HOST_DEVICE int64_t round16(int64_t v) { return (v + 15) / 16 * 16; }
  // Floats between two ranks' parts in `dots`: the rows rounded up to 16 bytes.
  static NK_HOST_DEVICE int64_t dot_stride(int64_t rows) { return (rows + 3) / 4 * 4; }

  // element_bytes[j]: element size of operand j (x, dy, dresidual_out), 0 if not staged;
  // ranks: CTAs of the cluster; outputs: how many of dweight and dbias are wanted; groups: row
  // groups of the dx pass.
  NK_HOST_DEVICE ColumnsLayout(int64_t rows, int64_t cols, int ranks, int groups, int outputs,
                               const int64_t (&element_bytes)[3]) {
    barrier = 0;
    weight = 16;
    rstd = weight + round16(cols * 4);
    dots = rstd + round16(rows * 4);
    mean = dots + int64_t(ranks) * dot_stride(rows) * 4;
    partials = mean + round16(rows * 4);
    int64_t at = partials + (groups > 1 ? round16(int64_t(outputs) * groups * cols * 4) : 0);
    for (int j = 0; j < 3; ++j) {
      // Up to 15 bytes before the segment (its address modulo 16) and the rounding after it.
      slot_bytes[j] = element_bytes[j] ? round16(cols * element_bytes[j] + 15) : 0;
      stage[j] = at;
      at += rows * slot_bytes[j];
    }
    total = at;
  }
};

}  // namespace normkit::cuda
