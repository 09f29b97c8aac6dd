// Float64 reference of the quantized forward (see nk_quant_mode in include/normkit/normkit.h)
// and the comparison of a backend's quantized outputs with it. The oracle for the tests and for
// `normkit check --quant`.
//
// The reference computes v in float64 (ref::rms_norm_fwd), then applies the documented rule in
// float64: amax and block maxima of the float64 v, scales from them, t = v * multiplier, and
// Q(t) from the formats' definitions (independent of src/common/quant_codes.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "normkit/normkit.h"
#include "reference/reference.h"

namespace normkit::ref {

// Q in float64: t rounded to nearest even in `y` (NK_FLOAT8_E4M3, NK_FLOAT8_E5M2 or NK_INT8)
// and saturated to [-qmax, qmax]; NaN stays NaN (FP8) or becomes 0 (int8). Throws
// std::invalid_argument for any other dtype.
double quantize_value(double t, nk_dtype y);

struct QuantFwdResult {
  nk_quant_mode mode = NK_QUANT_NONE;
  nk_dtype y_dtype = NK_FLOAT8_E4M3;
  int64_t rows = 0, hidden = 0;
  int64_t group_columns = 0;  // columns per scale group: hidden (TENSOR, TOKEN) or the block
  FwdResult base;             // base.y is v (unquantized, float64); residual_out, rstd
  std::vector<double> t;      // [rows * hidden] v * multiplier: what Q rounds
  std::vector<double> q;      // [rows * hidden] Q(t): the value of the expected code
  // Per scale group, row-major [rows, hidden / group_columns] (TENSOR: one group per row):
  std::vector<double> group_amax;  // max |v| over the group (TENSOR: over the row)
  std::vector<double> multiplier;  // TENSOR: scale[0]; TOKEN/BLOCK: 1 / scale; MXFP8: 2^-e
  std::vector<double> scales;      // TOKEN/BLOCK: the float64 scale; MXFP8: 2^e; TENSOR: scale[0]
  std::vector<int> exponents;      // MXFP8: e per block (scale byte e + 127); empty otherwise
  double amax = 0;                 // max |v| over the tensor
};

// The quantized forward of `args` (host pointers; args.scale is read for TENSOR; the output
// pointers are not used). Throws std::invalid_argument for a quant mode / y_dtype pair the API
// rejects or a hidden that is not a multiple of the block.
QuantFwdResult rms_norm_fwd_quant(const nk_rms_norm_fwd_args& args);

// How a backend's quantized outputs compare with the reference.
//
// Rule. Let d = v_tolerance * (|v| + floor) bound the float32 error of one v (compare()'s
// measure; floor = 1e-2 * rms(v)). A backend code is
//   - exact when its value equals Q(t) (+0 and -0 are equal);
//   - a boundary mismatch when its value lies between Q(t - delta) and Q(t + delta), with
//       delta = |multiplier| * d + |t| * e_m,
//     e_m bounding the relative error of the backend's float32 multiplier (from its block amax,
//     the division and the reciprocal: 3 roundings of 2^-24): the backend rounded a value
//     within its float32 error of t, and the two sides round across a midpoint differently.
//     Usually the neighbour of Q(t); near zero, where v has cancelled (a bias against the
//     normalized value), d spans several fine subnormal steps. Those where the float64 t is a
//     near tie (within 8 float32 ulps, 2^-21 relative, of a midpoint, which any float32
//     computation may round either way; common with bfloat16 inputs, whose products are short
//     integers times a row constant) are counted as `ties` and always accepted; of the others,
//     which need a float32 error beyond a few roundings, at most 4 + elements / 1000 are
//     accepted;
//   - wrong otherwise (including NaN, Inf, int8 -128 and unwritten poison).
// Float32 scales must be within v_tolerance * (block amax + floor) / qmax + 3 ulp of the float64
// scale. An e8m0 scale byte must equal the reference's, except that it may be one off when the
// block amax lies within its float32 error of the power of two that separates the two exponents;
// that block's codes are then checked against the backend's exponent. amax must be within
// v_tolerance * (amax + floor). y_t, when given, must be exactly y transposed.
struct QuantComparison {
  int64_t elements = 0, exact = 0, ties = 0, boundary = 0, wrong = 0;
  int64_t boundary_limit = 0;
  int64_t scales = 0, scales_wrong = 0, scale_boundary = 0;
  double worst_scale_error = 0;  // |actual - expected| / allowed, worst over scales (<= 1 passes)
  bool amax_checked = false;
  double amax_actual = 0, amax_error = 0;  // |actual - expected| / allowed
  int64_t transposed_checked = 0, transposed_wrong = 0;
  std::string first_problem;  // the first wrong code, scale, amax or y_t element, in words
  bool passed = false;
  std::string describe() const;  // one line for logs
};

// Compares the outputs a backend wrote, given as an args struct whose y, scales, amax and y_t
// point at HOST copies (amax and y_t may be NULL to skip them; row strides 0 = contiguous), with
// `expected`. rows, hidden, quant, y_dtype and quant_block must describe the same call.
// v_tolerance is compare()'s bound for the float32 v: tolerance_for(NK_FLOAT32, input dtype,
// hidden).
QuantComparison compare_quant(const nk_rms_norm_fwd_args& actual, const QuantFwdResult& expected,
                              double v_tolerance);

}  // namespace normkit::ref
