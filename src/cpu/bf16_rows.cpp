// float32 -> bfloat16 arrays (bf16_rows.h): AVX512-BF16's VCVTNE2PS2BF16 (32 lanes) where the CPU
// has it, the element-wise form of common/dtype_host.h elsewhere.
//
// Why the instruction gives the element-wise form's bits whatever MXCSR holds (Intel SDM,
// VCVTNE2PS2BF16; tests/cpp/test_bf16_rows.cpp checks every float32 pattern, and the modes): it
// rounds to nearest even without reading MXCSR.RC, keeps a NaN's sign and top payload bits with
// the quiet bit set (as float_to_bf16_bits does), and rounds overflow to Inf. It reads a float32
// subnormal as a zero of its sign whatever MXCSR.DAZ holds, where float_to_bf16_bits rounds it
// to a bfloat16 subnormal (the formats share their exponent range): those lanes are rounded
// again element-wise. (No normal float32 rounds to a bfloat16 subnormal, so output flushing
// never applies.)
#include "cpu/bf16_rows.h"

#include "common/dtype_host.h"
#include "cpu/row_kernels.h"  // NK_CPU_ROW_CLONES

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#define NK_BF16_INSTRUCTIONS 1
#include <immintrin.h>
#endif

namespace normkit::cpu {
namespace {

// (Cloned per x86-64 level: the loop vectorizes on the integer operations.)
NK_CPU_ROW_CLONES void floats_to_bf16s_element_wise(const float* in, uint16_t* out, int64_t n) {
  for (int64_t j = 0; j < n; ++j) out[j] = float_to_bf16_bits(in[j]);
}

#ifdef NK_BF16_INSTRUCTIONS
#define NK_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

// Lanes of f holding a float32 subnormal (exponent field 0, mantissa not), which the
// instruction reads as zero.
NK_AVX512_BF16 inline __mmask16 subnormal_lanes(__m512 f) {
  const __m512i bits = _mm512_castps_si512(f);
  const __mmask16 exponent_zero = _mm512_testn_epi32_mask(bits, _mm512_set1_epi32(0x7f800000));
  return _mm512_mask_test_epi32_mask(exponent_zero, bits, _mm512_set1_epi32(0x007fffff));
}

// in[0..32) to out[0..32) in one 64-byte store; returns the subnormal lanes, bit j for element
// j.
NK_AVX512_BF16 inline uint32_t encode32(const float* in, uint16_t* out) {
  const __m512 lo = _mm512_loadu_ps(in), hi = _mm512_loadu_ps(in + 16);
  const __m512bh h = _mm512_cvtne2ps_pbh(hi, lo);
  _mm512_storeu_si512(out, reinterpret_cast<const __m512i&>(h));
  return uint32_t{subnormal_lanes(lo)} | uint32_t{subnormal_lanes(hi)} << 16;
}

NK_AVX512_BF16 void floats_to_bf16s_avx512(const float* in, uint16_t* out, int64_t n) {
  int64_t j = 0;
  for (; j + 32 <= n; j += 32) {
    uint32_t subnormal = encode32(in + j, out + j);
    for (; subnormal != 0; subnormal &= subnormal - 1) {
      const int lane = __builtin_ctz(subnormal);
      out[j + lane] = float_to_bf16_bits(in[j + lane]);
    }
  }
  // The last elements (fewer than 32) through the element-wise form.
  for (; j < n; ++j) out[j] = float_to_bf16_bits(in[j]);
}

Bf16Path detect_bf16_path() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512vl") &&
                 __builtin_cpu_supports("avx512bw")
             ? Bf16Path::kAvx512Bf16
             : Bf16Path::kElementWise;
}
#endif

}  // namespace

Bf16Path bf16_path() {
#ifdef NK_BF16_INSTRUCTIONS
  static const Bf16Path path = detect_bf16_path();
  return path;
#else
  return Bf16Path::kElementWise;
#endif
}

bool bf16_path_supported(Bf16Path path) {
  return static_cast<int>(path) <= static_cast<int>(bf16_path());
}

void floats_to_bf16s(Bf16Path path, const float* in, uint16_t* out, int64_t n) {
#ifdef NK_BF16_INSTRUCTIONS
  if (path == Bf16Path::kAvx512Bf16) return floats_to_bf16s_avx512(in, out, n);
#endif
  floats_to_bf16s_element_wise(in, out, n);
}

void floats_to_bf16s(const float* in, uint16_t* out, int64_t n) {
  floats_to_bf16s(bf16_path(), in, out, n);
}

}  // namespace normkit::cpu
