// Arrays of float32 rounded to bfloat16 with exactly the bits of common/dtype_host.h's
// float_to_bf16_bits, by AVX512-BF16's VCVTNE2PS2BF16 where the CPU has it: one instruction per
// 32 elements where the element-wise form takes 6-7 integer operations per vector of 16 (with
// the rounding dropped altogether, as an upper bound, the forward took 0.65-0.82x its time and
// the backward 0.76-0.83x; 2026-11-27). Used for the backward's dx (row_ops.h,
// BufferedWriteChunk). The CPU is asked at run time, so the build keeps its baseline target.
#pragma once

#include <cstdint>

namespace normkit::cpu {

// out[j] = float_to_bf16_bits(in[j]) for j in [0, n).
void floats_to_bf16s(const float* in, uint16_t* out, int64_t n);

// The implementations: the function above uses the last one the CPU supports (bf16_path());
// tests run each supported one.
enum class Bf16Path { kElementWise, kAvx512Bf16 };
Bf16Path bf16_path();
bool bf16_path_supported(Bf16Path path);
void floats_to_bf16s(Bf16Path path, const float* in, uint16_t* out, int64_t n);

}  // namespace normkit::cpu
