// The CPU forward's quantization of a finished float32 row: y codes of v * multiplier, and
// max |v|, in loops that vectorize (compiled for several x86-64 levels, row_kernels.h). The
// codes are those of common/quant_codes.h bit for bit (every float32 input is checked in
// tests/cpp/test_quantize_span.cpp); the encoders below only avoid its branches.
#pragma once

#include <cstdint>

#include "normkit/normkit.h"

namespace normkit::cpu {

// y[j] = Q(v[j] * multiplier) for j in [0, n): quantize_code of common/quant_rules.h, `dtype`
// e4m3, e5m2 or int8.
void quantize_span(uint8_t* y, const float* v, int64_t n, float multiplier, nk_dtype dtype);

// max over j of |v[j]|, NaN elements ignored (fold_abs_max of common/quant_rules.h); 0 for n 0.
float abs_max(const float* v, int64_t n);

// TOKEN (block = n) and BLOCK: per block of v[0..n) (n a multiple of block), scale =
// dynamic_scale(the block's abs_max, qmax, scale_ub) into scales[b] and y = Q(v / scale) by
// dynamic_multiplier. Returns abs_max of the whole row.
float quantize_scaled_blocks(uint8_t* y, float* scales, const float* v, int64_t n,
                             int64_t block, float qmax, float scale_ub, nk_dtype dtype);

// MXFP8: per 32 elements of v[0..n) (n a multiple of 32), e = mx_scale_exponent(the block's
// abs_max), scales[b] = its e8m0 byte, y = Q(v * 2^-e). Returns abs_max of the whole row.
float quantize_mx_blocks(uint8_t* y, uint8_t* scales, const float* v, int64_t n,
                         nk_dtype dtype);

}  // namespace normkit::cpu
