// The per-tensor quantized forward with y_t in one grid: forward units (the pinned registers
// kernel's rows) and transpose units (a band of 64 rows of y into y_t), ordered by
// transpose_tickets.h. A band's transposes read y back from L2 a few microseconds after it was
// written, so that HBM sees x read once and y and y_t written once; the two-kernel path read
// the whole y back from HBM (25% more bytes). Forward units count into their band's counter;
// a transpose unit waits for its band's count.
#pragma once

#include "cuda/async_copy.cuh"
#include "cuda/byte_transpose.cuh"
#include "cuda/rms_norm_fwd_quant_kernels.cuh"
#include "cuda/transpose_tickets.h"

namespace normkit::cuda {

struct TicketParams {
  TransposeTickets tickets;
  // [tickets.bands] counters, zero before the launch; each launch leaves them zero (the last
  // transpose unit of a band resets its counter), so a launch needs no memset.
  unsigned* band_done = nullptr;
};

// Dynamic shared memory of a transpose unit: kBandRows rows of `cols` codes, each 16 rows
// shifted by 32 bytes (band_tile_offset).
constexpr int64_t band_tile_bytes(int64_t cols) {
  return kBandRows * cols + (kBandRows / 16) * 32;
}

// Byte offset of (row, col) in the band tile. The shift per 16 rows puts the 4-byte reads of
// transpose_band_piece's second phase (4 row blocks x 8 column groups per warp) on 32
// distinct banks.
__device__ __forceinline__ int band_tile_offset(int row, int col, int cols) {
  return row * cols + (row >> 4) * 32 + col;
}

__device__ __forceinline__ unsigned load_acquire_gpu(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Counts the CTA's forward unit into its band once every thread's stores are issued: the
// barrier, then one thread's release add (the CTA's y visible at GPU scope before the count, as
// CUTLASS's semaphore release). red.release is MEMBAR.ALL.GPU and a REDG in the SASS;
// __threadfence() and atomicAdd were MEMBAR.SC.GPU, an invalidation of the SM's whole L1
// (CCTL.IVALL) and an ATOMG.
__device__ __forceinline__ void count_band_unit(unsigned* counter) {
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    asm volatile("red.release.gpu.global.add.u32 [%0], 1;\n" ::"l"(counter) : "memory");
  }
}

// Waits until the band's `units` forward units have counted, then counts this transpose unit
// too; the band's last transpose unit (of `pieces`) returns the counter to zero. Every other
// transpose unit has passed its wait by then, and nothing reads the counter again in this launch.
__device__ __forceinline__ void wait_for_band(unsigned* counter, unsigned units, unsigned pieces) {
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    while (load_acquire_gpu(counter) < units) __nanosleep(200);
    if (atomicAdd(counter, 1u) == units + pieces - 1) atomicExch(counter, 0u);
  }
  __syncthreads();
}

// y_t[c][r] = y[r][c] for rows [r0, r0 + 64) and columns [c0, c0 + SLICES * W) of y, W the
// CTA's threads (a multiple of 32), slice s through its own tile at s * band_tile_bytes(W). The
// launcher guarantees 16-byte aligned rows of y and y_t and hidden a multiple of 16. Phase 1:
// each thread copies 4 x 16 bytes per slice (16 rows apart) into the tile; phase 2: per slice,
// each thread reads 16 rows x 4 columns as 16 words, transposes them by byte permutes and
// stores 16 bytes into each of 4 rows of y_t (the warp's 4 row blocks of a column are one
// 64-byte run).
template <int SLICES>
__device__ __forceinline__ void transpose_band_piece(const FwdParams& p, int64_t r0, int64_t c0,
                                                     uint8_t* tile) {
  const int width = blockDim.x * blockDim.y;
  const int t = threadIdx.y * blockDim.x + threadIdx.x;
  const int64_t rows = p.shape.rows, hidden = p.shape.hidden;
  const int64_t slice_bytes = band_tile_bytes(width);
  {
    // Straight into the tile (cp.async): no registers held across the loads, so that all of a
    // thread's 4 x SLICES loads are in flight at once under the 56-register cap (as register
    // loads, 2 slices spilled). Parts past the rows or columns stay unwritten; phase 2 never
    // stores them.
    const int parts = width / 16;  // 16-byte parts per tile row
    const int r = t / parts, part = t - r * parts;
#pragma unroll
    for (int sl = 0; sl < SLICES; ++sl) {
      const int64_t col = c0 + sl * width + part * 16;
      const uint8_t* y = static_cast<const uint8_t*>(p.y) + col;
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int64_t row = r0 + q * 16 + r;
        if (row < rows && col < hidden) {
          cp_async<16>(tile + sl * slice_bytes + band_tile_offset(q * 16 + r, part * 16, width),
                       y + row * p.y_stride);
        }
      }
    }
    cp_async_commit();
    cp_async_wait<0>();
  }
  __syncthreads();
  const int lane = t & 31;
  const int block = lane & 3;                       // rows [16 * block, 16 * block + 16)
  const int c = ((t >> 5) * 8 + (lane >> 2)) * 4;  // columns [c, c + 4) of the slice
  const int64_t row = r0 + block * 16;
#pragma unroll 1  // (unrolled, 2 slices spilled 24 bytes at the 56-register cap)
  for (int sl = 0; sl < SLICES; ++sl) {
    const int64_t col = c0 + sl * width + c;
    if (col >= hidden || row >= rows) return;  // later slices lie further right
    const uint8_t* from = tile + sl * slice_bytes;
    unsigned out[4][4];  // [column][4-row group]
#pragma unroll
    for (int g = 0; g < 4; ++g) {
      unsigned in[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        in[k] = *reinterpret_cast<const unsigned*>(
            from + band_tile_offset(block * 16 + g * 4 + k, c, width));
      }
      unsigned cols[4];
      transpose_4x4_bytes(in[0], in[1], in[2], in[3], cols);
#pragma unroll
      for (int j = 0; j < 4; ++j) out[j][g] = cols[j];
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      uint8_t* to = p.quant.y_t + (col + j) * p.quant.y_t_stride + row;
      if (row + 16 <= rows) {
        __stcg(reinterpret_cast<uint4*>(to),
               make_uint4(out[j][0], out[j][1], out[j][2], out[j][3]));
      } else {  // the last rows, fewer than 16 (unrolled: a runtime index put out in local memory)
#pragma unroll
        for (int i = 0; i < 16; ++i) {
          if (i < rows - row) to[i] = static_cast<uint8_t>(out[j][i / 4] >> (8 * (i % 4)));
        }
      }
    }
  }
}

// The grid of transpose_tickets.h over the pinned per-tensor forward (16-byte vectors of 16-bit
// x and weights, EXACT plans of up to kSmallItems vectors per thread, no clusters; 56 registers
// as rms_norm_fwd_quant_registers_exact_small). A transpose unit takes SLICES x threads columns
// (tp.tickets.piece_cols). Dynamic shared memory: SLICES * band_tile_bytes(threads).
// ADD_WEIGHT: as fwd_quant_registers_row. The bias stays a runtime test here: without it (as
// the pinned kernels take it where there is none) this grid ran 1-4% slower, though its forward
// units alone ran 6-8% faster (fourteenth session). ROW_SUM_QUADS: as fwd_quant_registers_row
// (LaunchConfig::row_sum_quads).
template <typename XT, typename WT, bool ADD_WEIGHT, int SLICES, bool ROW_SUM_QUADS = false>
__global__ void __maxnreg__(56) rms_norm_fwd_quant_ticketed(FwdParams p, TicketParams tp) {
  static_assert(sizeof(XT) == 2 && sizeof(WT) == 2, "16-bit x and weights");
  extern __shared__ __align__(16) uint8_t band_tile[];
  const TicketUnit u = tp.tickets.unit(blockIdx.x);
  if (u.forward) {
    if (u.index < tp.tickets.forward_units) {
      const int64_t row = static_cast<int64_t>(u.index) * blockDim.y + threadIdx.y;
      fwd_quant_registers_row<XT, WT, NK_QUANT_TENSOR, 8, kSmallItems, true, true, ADD_WEIGHT,
                              /*BIAS=*/true, /*E4M3_BLOCKS=*/false, /*MX_PAIRS=*/false,
                              ROW_SUM_QUADS>(
          p, RowChunk<8, true>(p.shape, row));
    }
    count_band_unit(tp.band_done + u.band);
  } else {
    wait_for_band(tp.band_done + u.band, tp.tickets.units_per_band, tp.tickets.pieces_per_band);
    const int64_t r0 = static_cast<int64_t>(u.band) * kBandRows;
    const int64_t c0 = static_cast<int64_t>(u.index) * tp.tickets.piece_cols;
    transpose_band_piece<SLICES>(p, r0, c0, band_tile);
  }
}

}  // namespace normkit::cuda
