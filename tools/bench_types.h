// What `normkit bench` measures and reports, shared by the CPU and CUDA runners and the
// report writers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "normkit/normkit.h"
#include "shapes.h"
#include "timing.h"

namespace nktool {

struct BenchConfig {
  nk_dtype dtype = NK_BFLOAT16;         // x, y, dy, dx (and residual) in this dtype
  nk_dtype weight_dtype = NK_BFLOAT16;  // weight, bias, dweight, dbias (--weight-dtype)
  nk_dtype out_dtype = NK_BFLOAT16;     // the forward's y (--out-dtype; default dtype)
  bool weight = true;          // --no-weight: no weight read, no dweight written (scale 1)
  bool bias = false;           // forward adds a bias (read); backward also writes dbias
  bool zero_centered = false;  // scale by (1 + weight); the weight is then near 0
  bool residual = false;         // forward fuses a residual add; backward adds dresidual_out
  bool fwd = true, bwd = true;
  int reps = 100;
  float eps = 1e-6f;
  // --quant: the forward alone, with y quantized to quant_dtype (plus scales, amax, and y_t
  // with --transposed).
  nk_quant_mode quant = NK_QUANT_NONE;
  int64_t quant_block = 0;  // block modes: elements per scale
  nk_dtype quant_dtype = NK_FLOAT8_E4M3;
  bool transposed = false;
  // --same-size-copy: per shape and pass, a device-to-device copy moving the pass's bytes (half
  // read, half written), timed as the pass is: what the timing method itself gives at that size.
  bool same_size_copy = false;
  // CUDA: before each L2 flush, the inputs' L2 lines go back to normal eviction priority
  // (the kernels read evict-last, which a memset flush does not evict); --keep-l2-priority
  // flushes without that, as the bench did until the forty-first session.
  bool demote_inputs = true;
};

// y's dtype: the quantized one with --quant, else out_dtype.
nk_dtype y_dtype(const BenchConfig& c);
// What the forward and backward are given beyond x (and dy), for the header and --explain:
// "weight bf16 near 1, bias bf16" and the like.
std::string bench_inputs_text(const BenchConfig& c);
// Bytes of the quantization scales one forward writes (0 without --quant or in tensor mode).
double scales_bytes(const Shape& s, const BenchConfig& c);

// Bytes one call moves, by the explicit formulas of /work/shared/PEERS.md (rstd not counted;
// size(w) is the weight dtype's, which bias, dweight and dbias share; --no-weight drops the
// weight's hidden*size(w) and dweight's):
//   forward  = rows*hidden*(size(x) + size(y)) + hidden*size(w)
//              [+ hidden*size(w) with a bias: bias read]
//              [+ rows*hidden*2*size(x) with a residual: residual read, residual_out written]
//              [+ the scales, and rows*hidden*size(y) for y_t, with --quant]
//   backward = rows*hidden*(size(x) + size(dy) + size(dx)) + 2*hidden*size(w)
//              [+ hidden*size(w) with a bias: dbias written]
//              [+ rows*hidden*size(x) with a residual: dresidual_out read]
double fwd_bytes(const Shape& s, const BenchConfig& c);
double bwd_bytes(const Shape& s, const BenchConfig& c);
std::string fwd_bytes_formula(const BenchConfig& c);
std::string bwd_bytes_formula(const BenchConfig& c);

// The measured ceiling: one large copy, bytes read + bytes written per second.
struct CopyCeiling {
  double gbps = 0;          // 1e9 bytes / s
  size_t buffer_bytes = 0;  // size of the source (= destination) buffer
  int reps = 0;
  TimingStats us;
  std::string method;  // how it was measured, for the header
};

struct PassTiming {
  bool measured = false;
  TimingStats us;
  double bytes = 0;
  size_t workspace_bytes = 0;  // backward only
  std::string explain;         // launch configuration (--explain, CUDA only)
  bool copy_measured = false;  // --same-size-copy
  TimingStats copy_us;         // a copy of `bytes` (read + written), timed the same way
  bool remeasured = false;     // `us` is a second measurement (bench_remeasure.h)
  TimingStats first_us;        // when remeasured: the first, unsteady one
};

struct ShapeResult {
  Shape shape;
  PassTiming fwd, bwd;
  std::string error;    // non-empty when this shape could not be measured
  std::string skipped;  // non-empty when the configuration does not apply to this shape
};

// Why `c` does not apply to shape `s` (a block mode on a hidden size that is not a multiple of
// the block), or "" when it does.
std::string bench_skip_reason(const Shape& s, const BenchConfig& c);

struct BenchReport {
  std::string backend;  // "cuda" or "cpu"
  std::string device;   // device or CPU name
  std::string timing_method;
  std::string date_utc;
  std::string command;
  std::vector<std::string> notes;  // e.g. why the CPU ran a subset of the default shapes
  BenchConfig config;
  CopyCeiling copy;
  std::vector<ShapeResult> shapes;
};

}  // namespace nktool
