// The CPU forward's quantization loops (quantize_span.h): branch-free forms of the rules of
// common/quant_rules.h, inlined into each target clone.
#include "cpu/quantize_span.h"

#include <cstring>
#include <utility>

#include "common/dtype_host.h"
#include "common/quant_rules.h"
#include "cpu/row_kernels.h"

namespace normkit::cpu {
namespace {

// 16 floats, one per lane of a vector (GCC vector extensions: one AVX-512 register, two AVX2
// ones, four SSE ones). MXFP8 puts one 32-element block in each lane, 16 blocks at a time.
constexpr int kLanes = 16;
using Lanes = float __attribute__((vector_size(kLanes * sizeof(float))));
using LaneBits = uint32_t __attribute__((vector_size(kLanes * sizeof(float))));
using LaneInts = int32_t __attribute__((vector_size(kLanes * sizeof(float))));
using LaneBytes = uint8_t __attribute__((vector_size(kLanes)));

// The functions below that take or return these vectors are always inlined: one left out of
// line is compiled for the baseline x86-64, which passes 64-byte vectors in memory, while its
// AVX-512 caller (NK_CPU_ROW_CLONES) passes them in registers. The first build of the MXFP8
// groups crashed so. GCC's -Wpsabi warning about it is moot once nothing is out of line; it is
// reported at the end of the file, so it stays off to the end (no pop).
#pragma GCC diagnostic ignored "-Wpsabi"
#define NK_LANES_INLINE [[gnu::always_inline]] inline

// Float bits and back, for one float and for Lanes, so that each encoder below is written once
// for both: the same operations, lane by lane.
inline uint32_t as_bits(float f) { return float_to_bits(f); }
inline float as_floats(uint32_t u) { return bits_to_float(u); }
NK_LANES_INLINE LaneBits as_bits(Lanes f) { return reinterpret_cast<LaneBits>(f); }
NK_LANES_INLINE Lanes as_floats(LaneBits u) { return reinterpret_cast<Lanes>(u); }

NK_LANES_INLINE Lanes load_lanes(const float* v) {
  Lanes x;
  std::memcpy(&x, v, sizeof(x));
  return x;
}

// float8_magnitude_code (common/quant_codes.h) without branches: both cases computed, one
// selected. a: |f| in float32 bits, not NaN. Below the smallest normal, |f| + 2^(24 - BIAS -
// MANT) has an ulp of one subnormal unit, 2^(1 - BIAS - MANT), so the float addition rounds |f|
// to whole units, to nearest even (the default rounding mode), and the low bits of the sum
// count them; a float32 subnormal gives 0 with or without denormals-are-zero, as it should.
template <int MANT, int BIAS, uint32_t MAXC, typename Bits>
NK_LANES_INLINE Bits magnitude_code(Bits a) {
  constexpr uint32_t kMinNormal = static_cast<uint32_t>(128 - BIAS) << 23;
  constexpr int kDrop = 23 - MANT;
  const Bits r = a - (static_cast<uint32_t>(127 - BIAS) << 23);  // (wraps below kMinNormal)
  Bits normal = (r + ((1u << (kDrop - 1)) - 1u) + ((r >> kDrop) & 1u)) >> kDrop;
  normal = normal < MAXC ? normal : Bits{} + MAXC;  // also Inf
  constexpr float kUnits = static_cast<float>(1u << (24 - BIAS - MANT));
  const Bits subnormal = as_bits(as_floats(a) + kUnits) - float_to_bits(kUnits);
  return a >= kMinNormal ? normal : subnormal;
}

// The float8 code of f (float) or of each lane (Lanes), in the low byte of its 32 bits.
template <int MANT, int BIAS, uint32_t MAXC, typename Floats>
NK_LANES_INLINE auto float8_code_bits(Floats f) {
  const auto u = as_bits(f);
  using Bits = decltype(u);
  const Bits sign = (u >> 24) & 0x80u, a = u & 0x7fffffffu;
  const Bits code = a > 0x7f800000u ? Bits{} + 0x7fu : magnitude_code<MANT, BIAS, MAXC>(a);
  return sign | code;
}

// float_to_int8 without the early return (NaN goes through as 0), up to the conversion: a
// whole number in [-127, 127] as a float.
template <typename Floats>
NK_LANES_INLINE Floats int8_code_value(Floats f) {
  const Floats g = f == f ? f : Floats{};
  const Floats c = g < -127.0f ? Floats{} - 127.0f : (g > 127.0f ? Floats{} + 127.0f : g);
  return (c + 12582912.0f) - 12582912.0f;
}

// The encoders, for one float and for 16 at a time (types, not function pointers: a pointer
// passed to a function that is not inlined stays a call per element).
template <int MANT, int BIAS, uint32_t MAXC>
struct Float8Code {
  uint8_t operator()(float f) const {
    return static_cast<uint8_t>(float8_code_bits<MANT, BIAS, MAXC>(f));
  }
  NK_LANES_INLINE LaneBytes operator()(Lanes f) const {
    return __builtin_convertvector(float8_code_bits<MANT, BIAS, MAXC>(f), LaneBytes);
  }
};
using E4m3Code = Float8Code<3, 7, 0x7eu>;
using E5m2Code = Float8Code<2, 15, 0x7bu>;

struct Int8Code {
  uint8_t operator()(float f) const {
    return static_cast<uint8_t>(static_cast<int8_t>(static_cast<int>(int8_code_value(f))));
  }
  NK_LANES_INLINE LaneBytes operator()(Lanes f) const {  // (int32 to uint8 keeps the low byte)
    return __builtin_convertvector(__builtin_convertvector(int8_code_value(f), LaneInts),
                                   LaneBytes);
  }
};

// y[j] = code(v[j] * multiplier): 16 codes per step in the explicit vector encoder, the last
// n % 16 one at a time (the same operations, so the same bits). Four steps unrolled: one step
// at a time was level with GCC's own vectorization of the scalar loop (which unrolls it four
// times), four took 0.93x its time.
template <typename Code>
NK_LANES_INLINE void encode(uint8_t* y, const float* v, int64_t n, float multiplier, Code code) {
  const int64_t whole = n / kLanes * kLanes;
#pragma GCC unroll 4
  for (int64_t j = 0; j < whole; j += kLanes) {
    const LaneBytes codes = code(load_lanes(v + j) * multiplier);
    std::memcpy(y + j, &codes, sizeof(codes));
  }
  for (int64_t j = whole; j < n; ++j) y[j] = code(v[j] * multiplier);
}

// max(m, |x|) lane by lane, a NaN in x ignored as fold_abs_max ignores it (the comparison is
// false); |x| is x with its sign bit cleared.
NK_LANES_INLINE Lanes fold_abs_lanes(Lanes m, Lanes x) {
  const Lanes a = as_floats(as_bits(x) & 0x7fffffffu);
  return a > m ? a : m;
}

// The maximum of the lanes (never NaN), halved in vectors down to four, then folded: MXFP8's
// 32-element blocks spent most of their time in 16 scalar folds here.
NK_LANES_INLINE float lanes_max(Lanes lane) {
  using Half = float __attribute__((vector_size(kLanes / 2 * sizeof(float))));
  using Quarter = float __attribute__((vector_size(kLanes / 4 * sizeof(float))));
  Half lo, hi;
  std::memcpy(&lo, &lane, sizeof(lo));
  std::memcpy(&hi, reinterpret_cast<const char*>(&lane) + sizeof(lo), sizeof(hi));
  const Half h = hi > lo ? hi : lo;
  Quarter qlo, qhi;
  std::memcpy(&qlo, &h, sizeof(qlo));
  std::memcpy(&qhi, reinterpret_cast<const char*>(&h) + sizeof(qlo), sizeof(qhi));
  const Quarter q = qhi > qlo ? qhi : qlo;
  float m = 0.0f;
  for (int l = 0; l < kLanes / 4; ++l) m = fold_abs_max(m, q[l]);
  return m;
}

// Per-lane maxima, then combined: the maximum of non-negative values is the same in any order
// (a zero never replaces the +0 each lane starts from), NaN ignored as fold_abs_max does (its
// comparisons are false). The lanes are GCC vectors, |v| a cleared sign bit: written as 16
// scalar folds, GCC kept them scalar (24% of a per-tensor forward's time at 4096 x 4096). Four
// vectors of lanes, so that each fold need not wait for the one before: in one vector, the
// chain of compares took 0.07 ns per element of a row in L1, four 0.03.
NK_LANES_INLINE float lanes_abs_max(const float* v, int64_t n) {
  constexpr int kChains = 4;
  Lanes lanes[kChains] = {};
  const int64_t whole_steps = n / (kChains * kLanes) * (kChains * kLanes);
  for (int64_t j = 0; j < whole_steps; j += kChains * kLanes) {
    for (int c = 0; c < kChains; ++c) {
      lanes[c] = fold_abs_lanes(lanes[c], load_lanes(v + j + c * kLanes));
    }
  }
  const int64_t whole = n / kLanes * kLanes;
  for (int64_t j = whole_steps; j < whole; j += kLanes) {
    lanes[0] = fold_abs_lanes(lanes[0], load_lanes(v + j));
  }
  for (int c = 1; c < kChains; ++c) lanes[0] = lanes[c] > lanes[0] ? lanes[c] : lanes[0];
  float m = lanes_max(lanes[0]);
  for (int64_t j = whole; j < n; ++j) m = fold_abs_max(m, v[j]);
  return m;
}

// MXFP8 takes its blocks 16 at a time, one block per lane: the blocks' maxima, exponents, e8m0
// bytes and multipliers are then a few vector operations for all 16, and the codes 16 at a time
// in explicit vectors. One block at a time (each block's lanes reduced to one float, its
// exponent in scalar code, 32 codes in GCC's own vectorization of a 32-trip loop), the MXFP8
// forward took 3x the time of the per-tensor one (bench/results/2026-11-27T0005-cpu-mxfp8).
constexpr int kGroupBlocks = kLanes;
constexpr int64_t kGroupElements = kGroupBlocks * kMxfp8Block;
static_assert(kMxfp8Block == 2 * kLanes, "a block is two vectors");

// Lane i of the shuffle that halves_max<G> takes from (a, b) (lanes 16-31 are b's): the lower
// (or, with `high`, the upper) half of each G-lane group, a's groups then b's.
template <int G>
constexpr int halves_lane(int i, bool high) {
  const int j = i % (kLanes / 2);
  return (i < kLanes / 2 ? 0 : kLanes) + j / (G / 2) * G + (high ? G / 2 : 0) + j % (G / 2);
}

template <int G, int... I>
constexpr LaneInts halves_mask(bool high, std::integer_sequence<int, I...>) {
  return LaneInts{halves_lane<G>(I, high)...};
}

// a and b each hold the partial maxima of 16 / G blocks, G lanes a block; returns their 32 / G
// blocks (a's, then b's) at G / 2 lanes a block, each lane the max of two of its block's lanes.
template <int G>
NK_LANES_INLINE Lanes halves_max(Lanes a, Lanes b) {
  constexpr auto kSequence = std::make_integer_sequence<int, kLanes>{};
  constexpr LaneInts kLow = halves_mask<G>(false, kSequence);
  constexpr LaneInts kHigh = halves_mask<G>(true, kSequence);
  const Lanes lo = __builtin_shuffle(a, b, kLow), hi = __builtin_shuffle(a, b, kHigh);
  return hi > lo ? hi : lo;
}

// Lane k: max |v| over block k of the 16 blocks of `block` elements (a multiple of kLanes) from
// v, NaN ignored. Each block's vectors are folded into one, then pairs of vectors are halved
// until one lane is left per block (the maximum of non-negative, non-NaN floats is the same in
// any order).
NK_LANES_INLINE Lanes group_block_maxima(const float* v, int64_t block) {
  Lanes p[kGroupBlocks];
  for (int k = 0; k < kGroupBlocks; ++k) {
    const float* first = v + k * block;
    p[k] = Lanes{};
    for (int64_t j = 0; j < block; j += kLanes) p[k] = fold_abs_lanes(p[k], load_lanes(first + j));
  }
  for (int k = 0; k < 8; ++k) p[k] = halves_max<16>(p[2 * k], p[2 * k + 1]);
  for (int k = 0; k < 4; ++k) p[k] = halves_max<8>(p[2 * k], p[2 * k + 1]);
  for (int k = 0; k < 2; ++k) p[k] = halves_max<4>(p[2 * k], p[2 * k + 1]);
  return halves_max<2>(p[0], p[1]);
}

// mx_scale_exponent of common/quant_rules.h for 16 maxima (non-negative, not NaN): the
// exponent field, integer only.
NK_LANES_INLINE LaneInts mx_exponents(Lanes m, int emax) {
  const LaneInts field = reinterpret_cast<LaneInts>((as_bits(m) >> 23) & 0xffu);
  LaneInts e = field - (127 + emax);
  e = e < -127 ? LaneInts{} - 127 : e;
  e = e > 127 ? LaneInts{} + 127 : e;
  return field == 0 ? LaneInts{} - 127 : e;
}

// mx_multiplier (2^-e from bits; 2^-127 a subnormal) for 16 exponents.
NK_LANES_INLINE Lanes mx_multipliers(LaneInts e) {
  const LaneInts k = -e;
  const LaneInts normal = (k + 127) << 23;
  return reinterpret_cast<Lanes>(k >= -126 ? normal : LaneInts{} + 0x00400000);
}

// One group's codes: block k's `block` elements times lane k of `multipliers`, by encode.
template <typename Code>
NK_LANES_INLINE void encode_group(uint8_t* y, const float* v, int64_t block, Lanes multipliers,
                                  Code code) {
  for (int k = 0; k < kGroupBlocks; ++k) {
    encode(y + k * block, v + k * block, block, multipliers[k], code);
  }
}

// MXFP8 over v[0..n) (n a multiple of kMxfp8Block) with one encoder: whole groups of blocks by
// the vector forms above, the blocks after the last whole group one at a time by the scalar
// rules. Returns the row's abs max (the maximum of the blocks' maxima).
template <typename Code>
NK_LANES_INLINE float mx_blocks(uint8_t* y, uint8_t* scales, const float* v, int64_t n,
                                int emax, Code code) {
  const int64_t groups = n / kGroupElements;
  Lanes row_lanes = {};
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t first = g * kGroupElements;
    const Lanes maxima = group_block_maxima(v + first, kMxfp8Block);
    row_lanes = maxima > row_lanes ? maxima : row_lanes;
    const LaneInts e = mx_exponents(maxima, emax);
    const LaneBytes bytes = __builtin_convertvector(e + 127, LaneBytes);  // mx_scale_byte
    std::memcpy(scales + g * kGroupBlocks, &bytes, sizeof(bytes));
    encode_group(y + first, v + first, kMxfp8Block, mx_multipliers(e), code);
  }
  float row_max = lanes_max(row_lanes);
  for (int64_t b = groups * kGroupBlocks; b < n / kMxfp8Block; ++b) {
    const float* vb = v + b * kMxfp8Block;
    const float m = lanes_abs_max(vb, kMxfp8Block);
    const int e = mx_scale_exponent(m, emax);
    encode(y + b * kMxfp8Block, vb, kMxfp8Block, mx_multiplier(e), code);
    scales[b] = mx_scale_byte(e);
    row_max = row_max > m ? row_max : m;
  }
  return row_max;
}

// dynamic_scale of common/quant_rules.h for 16 maxima (non-negative, not NaN); the division is
// IEEE float32 lane by lane, as the scalar one.
NK_LANES_INLINE Lanes dynamic_scales(Lanes m, float qmax, float scale_ub) {
  Lanes s = m / qmax;
  if (scale_ub > 0.0f) s = s > scale_ub ? Lanes{} + scale_ub : s;
  return s < kFloat32MinNormal ? Lanes{} + kFloat32MinNormal : s;
}

// TOKEN and BLOCK over v[0..n) (n a multiple of block) with one encoder, the dtype switch once
// per row. Blocks of whole vectors go 16 at a time, one block per lane, as MXFP8's: their
// maxima, scales and multipliers (two IEEE divisions each) are a few vector operations for all
// 16, where one block at a time waited on its two scalar divisions (the 128-element blocks took
// 1.3x the time of one block per row). The other blocks, and those after the last whole group,
// go one at a time: the block's max in vectors, its scale by the scalar rules, its codes by
// encode. TOKEN's one block per row always goes so, and so do blocks longer than
// kGroupedBlockMax: a group is read twice (maxima, then codes), which stays in L1 for blocks up
// to that, and a longer block spreads its own scale's cost over more elements.
constexpr int64_t kGroupedBlockMax = 256;

template <typename Code>
NK_LANES_INLINE float scaled_blocks(uint8_t* y, float* scales, const float* v, int64_t n,
                                    int64_t block, float qmax, float scale_ub, Code code) {
  const bool grouped = block % kLanes == 0 && block <= kGroupedBlockMax;
  const int64_t groups = grouped ? n / (block * kGroupBlocks) : 0;
  Lanes row_lanes = {};
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t first = g * kGroupBlocks * block;
    const Lanes maxima = group_block_maxima(v + first, block);
    row_lanes = maxima > row_lanes ? maxima : row_lanes;
    const Lanes group_scales = dynamic_scales(maxima, qmax, scale_ub);
    std::memcpy(scales + g * kGroupBlocks, &group_scales, sizeof(group_scales));
    const Lanes multipliers = 1.0f / group_scales;  // dynamic_multiplier
    encode_group(y + first, v + first, block, multipliers, code);
  }
  float row_max = lanes_max(row_lanes);
  for (int64_t b = groups * kGroupBlocks; b < n / block; ++b) {
    const float* vb = v + b * block;
    const float m = lanes_abs_max(vb, block);
    const float scale = dynamic_scale(m, qmax, scale_ub);
    encode(y + b * block, vb, block, dynamic_multiplier(scale), code);
    scales[b] = scale;
    row_max = row_max > m ? row_max : m;
  }
  return row_max;
}

#undef NK_LANES_INLINE

}  // namespace

NK_CPU_ROW_CLONES
void quantize_span(uint8_t* y, const float* v, int64_t n, float multiplier, nk_dtype dtype) {
  switch (dtype) {
    case NK_FLOAT8_E4M3: return encode(y, v, n, multiplier, E4m3Code{});
    case NK_FLOAT8_E5M2: return encode(y, v, n, multiplier, E5m2Code{});
    default: return encode(y, v, n, multiplier, Int8Code{});  // (RowQuantizer checks the dtype)
  }
}

NK_CPU_ROW_CLONES
float abs_max(const float* v, int64_t n) { return lanes_abs_max(v, n); }

NK_CPU_ROW_CLONES
float quantize_scaled_blocks(uint8_t* y, float* scales, const float* v, int64_t n,
                             int64_t block, float qmax, float scale_ub, nk_dtype dtype) {
  switch (dtype) {
    case NK_FLOAT8_E4M3: return scaled_blocks(y, scales, v, n, block, qmax, scale_ub, E4m3Code{});
    case NK_FLOAT8_E5M2: return scaled_blocks(y, scales, v, n, block, qmax, scale_ub, E5m2Code{});
    default: return scaled_blocks(y, scales, v, n, block, qmax, scale_ub, Int8Code{});
  }
}

NK_CPU_ROW_CLONES
float quantize_mx_blocks(uint8_t* y, uint8_t* scales, const float* v, int64_t n,
                         nk_dtype dtype) {
  const int emax = mx_emax(dtype);
  switch (dtype) {
    case NK_FLOAT8_E4M3: return mx_blocks(y, scales, v, n, emax, E4m3Code{});
    case NK_FLOAT8_E5M2: return mx_blocks(y, scales, v, n, emax, E5m2Code{});
    default: return mx_blocks(y, scales, v, n, emax, Int8Code{});
  }
}

}  // namespace normkit::cpu
