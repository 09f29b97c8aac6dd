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

}  // namespace normkit::cpu
