// float16 <-> float32 arrays (half_rows.h): F16C's VCVTPS2PH / VCVTPH2PS (8 lanes, or 16 in their
// AVX-512 forms) where the CPU has them, the element-wise forms of common/dtype_host.h elsewhere.
//
// Why the instructions give the element-wise forms' bits whatever MXCSR holds (Intel SDM,
// VCVTPS2PH and VCVTPH2PS; tests/cpp/test_half_rows.cpp checks every float32 pattern, and the
// modes):
// - VCVTPS2PH rounds by its immediate: 0 (bit 2 clear) is round to nearest even, MXCSR.RC is not
//   read. MXCSR.FTZ is ignored, so float16 subnormals come out exact. MXCSR.DAZ reads a float32
//   subnormal input as a zero of its sign, but every float32 subnormal (< 2^-126) rounds to that
//   zero anyway (half the smallest float16 subnormal is 2^-25). NaN: quiet bit set, sign and the
//   top 9 payload bits kept, as float_to_half_bits does; overflow rounds to Inf, as IEEE does.
// - VCVTPH2PS is exact and ignores MXCSR.DAZ (float16 subnormals are read as their values). It
//   sets the quiet bit of a signaling NaN, which half_bits_to_float leaves clear: where an array
//   holds a NaN, its NaNs are decoded again element-wise (exact for NaNs in any mode).
// The last elements that do not fill a vector go through one too, padded: the element-wise
// forms round float16 subnormals by MXCSR.RC.
#include "cpu/half_rows.h"

#include <cstring>

#include "common/dtype_host.h"

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define NK_HALF_INSTRUCTIONS 1
#include <immintrin.h>
#endif

namespace normkit::cpu {
namespace {

void floats_to_halves_element_wise(const float* in, uint16_t* out, int64_t n) {
  for (int64_t j = 0; j < n; ++j) out[j] = float_to_half_bits(in[j]);
}

void halves_to_floats_element_wise(const uint16_t* in, float* out, int64_t n) {
  for (int64_t j = 0; j < n; ++j) out[j] = half_bits_to_float(in[j]);
}

#ifdef NK_HALF_INSTRUCTIONS
// in[0..n) to out[0..n), W elements per call of encode(in, out); the rest through a zero-padded
// vector.
template <int W, typename Encode>
__attribute__((always_inline)) inline void encode_by_vectors(const float* in, uint16_t* out,
                                                             int64_t n, Encode encode) {
  int64_t j = 0;
  for (; j + W <= n; j += W) encode(in + j, out + j);
  if (j == n) return;
  float padded_in[W] = {};
  uint16_t padded_out[W];
  std::memcpy(padded_in, in + j, sizeof(float) * (n - j));
  encode(padded_in, padded_out);
  std::memcpy(out + j, padded_out, sizeof(uint16_t) * (n - j));
}

// The same for decode(in, out), which returns its NaN lanes as bits; returns whether any lane
// was NaN.
template <int W, typename Decode>
__attribute__((always_inline)) inline bool decode_by_vectors(const uint16_t* in, float* out,
                                                             int64_t n, Decode decode) {
  unsigned nan = 0;
  int64_t j = 0;
  for (; j + W <= n; j += W) nan |= decode(in + j, out + j);
  if (j == n) return nan != 0;
  uint16_t padded_in[W] = {};
  float padded_out[W];
  std::memcpy(padded_in, in + j, sizeof(uint16_t) * (n - j));
  nan |= decode(padded_in, padded_out);
  std::memcpy(out + j, padded_out, sizeof(float) * (n - j));
  return nan != 0;
}

// The element-wise decoding of the NaNs among in[0..n): their quiet bits as they were.
void restore_nans(const uint16_t* in, float* out, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    if ((in[j] & 0x7fffu) > 0x7c00u) out[j] = half_bits_to_float(in[j]);
  }
}

// VCVTPS2PH's immediate: round to nearest even, by the immediate rather than MXCSR.RC.
constexpr int kNearestEven = _MM_FROUND_TO_NEAREST_INT;

#define NK_F16C __attribute__((target("avx,f16c")))
#define NK_AVX512 __attribute__((target("avx512f")))

NK_F16C inline void encode8(const float* in, uint16_t* out) {
  const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in), kNearestEven);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), h);
}

NK_F16C inline unsigned decode8(const uint16_t* in, float* out) {
  const __m256 f = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in)));
  _mm256_storeu_ps(out, f);
  return static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(f, f, _CMP_UNORD_Q)));
}

// (The zero-masking forms with every lane selected: GCC 12 warns of the plain forms' undefined
// merge source.)
constexpr __mmask16 kAllLanes = 0xffff;

NK_AVX512 inline void encode16(const float* in, uint16_t* out) {
  const __m256i h = _mm512_maskz_cvtps_ph(kAllLanes, _mm512_loadu_ps(in), kNearestEven);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), h);
}

NK_AVX512 inline unsigned decode16(const uint16_t* in, float* out) {
  const __m512 f =
      _mm512_maskz_cvtph_ps(kAllLanes, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in)));
  _mm512_storeu_ps(out, f);
  return _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q);
}

NK_F16C void floats_to_halves_f16c(const float* in, uint16_t* out, int64_t n) {
  encode_by_vectors<8>(in, out, n, encode8);
}

NK_F16C void halves_to_floats_f16c(const uint16_t* in, float* out, int64_t n) {
  if (decode_by_vectors<8>(in, out, n, decode8)) restore_nans(in, out, n);
}

NK_AVX512 void floats_to_halves_avx512(const float* in, uint16_t* out, int64_t n) {
  encode_by_vectors<16>(in, out, n, encode16);
}

NK_AVX512 void halves_to_floats_avx512(const uint16_t* in, float* out, int64_t n) {
  if (decode_by_vectors<16>(in, out, n, decode16)) restore_nans(in, out, n);
}

HalfPath detect_half_path() {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx") || !__builtin_cpu_supports("f16c")) {
    return HalfPath::kElementWise;
  }
  return __builtin_cpu_supports("avx512f") ? HalfPath::kAvx512 : HalfPath::kF16c;
}
#endif

}  // namespace

HalfPath half_path() {
#ifdef NK_HALF_INSTRUCTIONS
  static const HalfPath path = detect_half_path();
  return path;
#else
  return HalfPath::kElementWise;
#endif
}

bool half_path_supported(HalfPath path) {
  return static_cast<int>(path) <= static_cast<int>(half_path());
}

void floats_to_halves(HalfPath path, const float* in, uint16_t* out, int64_t n) {
#ifdef NK_HALF_INSTRUCTIONS
  if (path == HalfPath::kAvx512) return floats_to_halves_avx512(in, out, n);
  if (path == HalfPath::kF16c) return floats_to_halves_f16c(in, out, n);
#endif
  floats_to_halves_element_wise(in, out, n);
}

void halves_to_floats(HalfPath path, const uint16_t* in, float* out, int64_t n) {
#ifdef NK_HALF_INSTRUCTIONS
  if (path == HalfPath::kAvx512) return halves_to_floats_avx512(in, out, n);
  if (path == HalfPath::kF16c) return halves_to_floats_f16c(in, out, n);
#endif
  halves_to_floats_element_wise(in, out, n);
}

void floats_to_halves(const float* in, uint16_t* out, int64_t n) {
  floats_to_halves(half_path(), in, out, n);
}

void halves_to_floats(const uint16_t* in, float* out, int64_t n) {
  halves_to_floats(half_path(), in, out, n);
}

}  // namespace normkit::cpu
