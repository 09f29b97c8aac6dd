// Arrays of float16 converted to and from float32 with exactly the bits of common/dtype_host.h's
// float_to_half_bits and half_bits_to_float (under MXCSR's default rounding), by F16C's
// conversion instructions where the CPU has them: one instruction per 8 elements (16 with
// AVX-512) where the element-wise forms take 15-20. The CPU is asked at run time, so the build
// keeps its baseline target. With the instructions no result depends on MXCSR (rounding field,
// DAZ, FTZ: see half_rows.cpp); the element-wise forms, used without them, ignore DAZ and FTZ
// but round float16 subnormals by MXCSR's rounding field.
#pragma once

#include <cstdint>

namespace normkit::cpu {

// out[j] = float_to_half_bits(in[j]) for j in [0, n).
void floats_to_halves(const float* in, uint16_t* out, int64_t n);

// out[j] = half_bits_to_float(in[j]) for j in [0, n).
void halves_to_floats(const uint16_t* in, float* out, int64_t n);

// The implementations: the two functions above use the last one the CPU supports (half_path());
// tests run each supported one.
enum class HalfPath { kElementWise, kF16c, kAvx512 };
HalfPath half_path();
bool half_path_supported(HalfPath path);
void floats_to_halves(HalfPath path, const float* in, uint16_t* out, int64_t n);
void halves_to_floats(HalfPath path, const uint16_t* in, float* out, int64_t n);

}  // namespace normkit::cpu
