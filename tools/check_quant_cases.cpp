#include "check_quant_cases.h"

#include <array>

#include "dtype_names.h"
#include "random.h"

namespace nktool {

std::string QuantCheckCase::mode_name() const {
  if (mode == NK_QUANT_BLOCK) return "block" + std::to_string(block == 0 ? 128 : block);
  return nk_quant_mode_name(mode);
}

std::string QuantCheckCase::flags() const {
  std::string f;
  f += residual ? 'R' : '.';
  f += has_bias ? 'B' : '.';
  f += zero_centered ? 'Z' : '.';
  f += has_weight ? '.' : 'N';
  f += strided ? 'S' : '.';
  f += misaligned ? 'M' : '.';
  f += in_place ? 'I' : '.';
  f += want_amax ? 'A' : '.';
  f += want_y_t ? 'T' : '.';
  f += scale_ub ? 'U' : '.';
  f += saturate ? 'X' : '.';
  f += large ? 'L' : '.';
  return f;
}

std::string QuantCheckCase::input_dtypes() const {
  return std::string(short_name(x_dtype)) + "/" + short_name(weight_dtype);
}

std::string quant_flags_legend() {
  return "flags: R residual add, B bias, Z zero-centered weight (1+w), N no weight, S strided "
         "rows,\n       M pointers off 16-byte alignment, I residual_out in place of residual, "
         "A amax, T y transposed,\n       U scale_ub (binds on half the scales or more), X "
         "saturating tensor scale (8 qmax / amax), L large magnitudes";
}

namespace {

constexpr std::array<nk_dtype, 3> kInputDtypes{NK_FLOAT32, NK_FLOAT16, NK_BFLOAT16};

struct ShapeSpec {
  int64_t rows, hidden;
};

// One quantization configuration of the list: mode, block and the dtypes it allows.
struct ModeSpec {
  nk_quant_mode mode;
  int64_t block;
  bool scale_ub;
  std::vector<nk_dtype> dtypes;
};

std::vector<ModeSpec> mode_specs() {
  const std::vector<nk_dtype> fp8{NK_FLOAT8_E4M3, NK_FLOAT8_E5M2};
  const std::vector<nk_dtype> all{NK_FLOAT8_E4M3, NK_FLOAT8_E5M2, NK_INT8};
  return {{NK_QUANT_TENSOR, 0, false, all}, {NK_QUANT_TOKEN, 0, false, all},
          {NK_QUANT_TOKEN, 0, true, all},   {NK_QUANT_BLOCK, 32, false, fp8},
          {NK_QUANT_BLOCK, 64, false, fp8}, {NK_QUANT_BLOCK, 0, false, fp8},
          {NK_QUANT_MXFP8, 0, false, fp8}};
}

// Tensor and token take any hidden (odd ones included); block modes a multiple of the block:
// one block, five blocks (not a multiple of 128 for 32/64), 3 x 128 and 4096.
std::vector<ShapeSpec> shapes_for(const ModeSpec& m, bool quick) {
  const std::vector<int64_t> rows = quick ? std::vector<int64_t>{1, 7}
                                          : std::vector<int64_t>{1, 7, 33};
  std::vector<int64_t> hidden;
  if (m.mode == NK_QUANT_TENSOR || m.mode == NK_QUANT_TOKEN) {
    hidden = quick ? std::vector<int64_t>{29, 4096}
                   : std::vector<int64_t>{29, 128, 1000, 4096, 17389};
  } else {
    const int64_t b = m.mode == NK_QUANT_MXFP8 ? 32 : m.block == 0 ? 128 : m.block;
    hidden = quick ? std::vector<int64_t>{5 * b, 384} : std::vector<int64_t>{b, 5 * b, 384, 4096};
  }
  std::vector<ShapeSpec> shapes;
  for (int64_t h : hidden) {
    for (int64_t r : rows) shapes.push_back({r, h});
  }
  return shapes;
}

}  // namespace

std::vector<QuantCheckCase> make_quant_check_cases(bool quick, uint64_t seed) {
  Random rng(seed * 0x9E3779B97F4A7C15ull + 0x51ED27ull);
  std::vector<QuantCheckCase> cases;
  for (const ModeSpec& m : mode_specs()) {
    for (nk_dtype y : m.dtypes) {
      const std::vector<ShapeSpec> shapes = shapes_for(m, quick);
      QuantCheckCase previous;
      for (size_t s = 0; s < shapes.size(); ++s) {
        QuantCheckCase c;
        c.rows = shapes[s].rows;
        c.hidden = shapes[s].hidden;
        c.mode = m.mode;
        // The default block is asked for both ways: 0 (the mode's default) and explicitly.
        c.block = m.block;
        if (m.block == 0 && m.mode == NK_QUANT_BLOCK && rng.coin()) c.block = 128;
        if (m.mode == NK_QUANT_MXFP8 && rng.coin()) c.block = 32;
        c.y_dtype = y;
        c.scale_ub = m.scale_ub;
        c.x_dtype = kInputDtypes[rng.below(3)];
        c.weight_dtype = kInputDtypes[rng.below(3)];
        // Residual, bias and zero-centered weight: random on even cases, the complement of the
        // previous case on odd ones, so every (mode, dtype) has each of them on and off.
        if (s % 2 == 0) {
          c.residual = rng.coin();
          c.has_bias = rng.coin();
          c.zero_centered = rng.coin();
          c.has_weight = c.zero_centered || rng.below(6) != 0;
        } else {
          c.residual = !previous.residual;
          c.has_bias = !previous.has_bias;
          c.zero_centered = !previous.zero_centered;
          c.has_weight = true;
        }
        c.strided = rng.coin();
        c.misaligned = rng.below(3) == 0;
        c.in_place = c.residual && rng.below(3) == 0;
        if (m.mode == NK_QUANT_TENSOR) {
          c.want_amax = s % 5 != 4;  // mostly on; off now and then (amax NULL)
          c.want_y_t = s % 3 != 2;
          c.saturate = s % 3 == 1;
          c.large = s % 4 == 1 || s % 6 == 3;  // with and without saturation
          c.scale_factor = 0.25 + 0.7 * rng.uniform01();
        } else {
          c.want_amax = rng.coin();
          c.large = rng.below(5) == 0;
          if (m.mode == NK_QUANT_BLOCK && !m.scale_ub) c.scale_ub = rng.below(3) == 0;
        }
        const float eps_choices[] = {1e-6f, 1e-5f, 1e-6f, 0.0f};
        c.eps = eps_choices[rng.below(4)];
        c.data_seed = rng.next_u64();
        previous = c;
        cases.push_back(c);
      }
    }
  }
  for (size_t i = 0; i < cases.size(); ++i) cases[i].id = static_cast<int>(i);
  return cases;
}

}  // namespace nktool
