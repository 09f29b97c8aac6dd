// The case list of the quantized part of `normkit check`: every quantization mode (tensor with
// amax and y_t, token with and without scale_ub, block 32/64/128, mxfp8) x every y dtype the
// mode allows x awkward shapes, with the forward's features (residual, bias, zero-centered
// weight, ...) drawn so that each (mode, dtype) sees each of them both on and off. A pure
// function of (quick, seed), like make_check_cases.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "normkit/normkit.h"

namespace nktool {

struct QuantCheckCase {
  int id = 0;
  int64_t rows = 1, hidden = 1;
  nk_dtype x_dtype = NK_FLOAT32;       // x, residual, residual_out
  nk_dtype weight_dtype = NK_FLOAT32;  // weight, bias
  nk_quant_mode mode = NK_QUANT_TENSOR;
  int64_t block = 0;                   // quant_block as passed (0 = the mode's default)
  nk_dtype y_dtype = NK_FLOAT8_E4M3;   // e4m3, e5m2 or int8

  bool has_weight = true;
  bool has_bias = false;
  bool zero_centered = false;  // only with a weight
  bool residual = false;
  bool strided = false;        // row padding on x, residual, y, residual_out and y_t
  bool misaligned = false;     // every tensor starts off 16-byte alignment
  bool in_place = false;       // residual_out aliases residual
  bool want_amax = false;      // amax requested
  bool want_y_t = false;       // TENSOR only: y transposed requested
  bool scale_ub = false;       // TOKEN/BLOCK: scale_ub just below the median unbounded scale
  bool saturate = false;       // TENSOR: scale = 8 qmax / amax, so most codes saturate
  bool large = false;          // x, residual ~1e4 and weights ~1e2..1e4: large v
  float eps = 1e-6f;
  // TENSOR without `saturate`: scale = factor * qmax / amax, factor < 1 (no saturation).
  double scale_factor = 0.5;

  uint64_t data_seed = 0;

  std::string mode_name() const;  // "tensor", "token", "block64", "mxfp8"
  std::string flags() const;      // fixed-width feature letters; see quant_flags_legend()
  std::string input_dtypes() const;  // "bf16/fp32": x/weight
};

std::string quant_flags_legend();

// quick: a second or two; otherwise about 250 cases, well under a minute on two CPU cores.
std::vector<QuantCheckCase> make_quant_check_cases(bool quick, uint64_t seed);

}  // namespace nktool
