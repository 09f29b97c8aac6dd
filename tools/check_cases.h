// The case list of `normkit check`: shapes, dtype combinations and argument features. The
// list is a pure function of (quick, seed), so "--seed N" reproduces a run exactly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "normkit/normkit.h"

namespace nktool {

struct CheckCase {
  int id = 0;
  int64_t rows = 1, hidden = 1;
  nk_dtype x_dtype = NK_FLOAT32;       // x, residual, residual_out, dresidual_out, dx
  nk_dtype weight_dtype = NK_FLOAT32;  // weight, bias, dweight, dbias
  nk_dtype y_dtype = NK_FLOAT32;       // y, and dy in the backward

  bool has_weight = true;
  bool has_bias = false;
  bool zero_centered = false;  // only with a weight
  bool residual = false;       // fused residual add in the forward
  bool strided = false;        // every matrix gets its own row padding (odd strides included)
  bool misaligned = false;     // tensors start off 16-byte alignment (by whole elements)
  bool in_place = false;       // y aliases x / residual_out aliases residual / dx aliases dy
                               // wherever the dtypes match
  bool tiny_inputs = false;    // x, residual and the backward's x scaled by 1e-3, so that
                               // eps changes the result
  bool dresidual_out = false;  // backward adds a gradient flowing into residual_out
  bool want_dweight = true;
  bool want_dbias = false;
  float eps = 1e-6f;

  uint64_t data_seed = 0;  // seeds the inputs and the paddings/offsets of this case

  // Fixed-width feature letters, '.' where off; see check_flags_legend().
  std::string flags() const;
  // "x=bf16 w=fp32 y=fp16" style.
  std::string dtypes() const;
};

std::string check_flags_legend();

// quick: a few seconds on two CPU cores; otherwise about a minute, reference included.
std::vector<CheckCase> make_check_cases(bool quick, uint64_t seed);

}  // namespace nktool
