// Validation of the quantized-output fields of nk_rms_norm_fwd_args (see nk_quant_mode): the
// mode, y_dtype for the mode, which pointers the mode needs and which it would ignore, the block
// size, scale_ub and the transposed output's stride. Memory overlap is checked in validate.cpp.
//
// A field the mode would not read (scale outside TENSOR, scales with TENSOR, y_t outside
// TENSOR, any quant pointer with NK_QUANT_NONE, a nonzero scale_ub or quant_block where it has
// no meaning) is rejected rather than ignored: it almost always means the caller set the wrong
// mode, and ignoring it would silently skip an output the caller expects.
#include <cmath>
#include <cstdio>
#include <string>

#include "common/dtype_host.h"
#include "common/error.h"
#include "common/quant_layout.h"
#include "common/validate.h"

namespace normkit {
namespace {

std::string str(int64_t v) { return std::to_string(v); }

// "float8_e4m3 (3)", or "99" for a value that is no dtype.
std::string dtype_text(nk_dtype d) {
  const std::string name = nk_dtype_name(d);
  const std::string number = str(static_cast<int>(d));
  return name == "invalid" ? number : name + " (" + number + ")";
}

std::string mode_text(nk_quant_mode m) {
  static const char* const kNames[] = {"NK_QUANT_NONE", "NK_QUANT_TENSOR", "NK_QUANT_TOKEN",
                                       "NK_QUANT_BLOCK", "NK_QUANT_MXFP8"};
  const int i = static_cast<int>(m);
  return i >= 0 && i <= 4 ? kNames[i] : str(i);
}

void check_mode(nk_quant_mode m) {
  if (static_cast<int>(m) < NK_QUANT_NONE || static_cast<int>(m) > NK_QUANT_MXFP8) {
    fail_argument("quant is " + str(static_cast<int>(m)) +
                  "; expected NK_QUANT_NONE (0), NK_QUANT_TENSOR (1), NK_QUANT_TOKEN (2), "
                  "NK_QUANT_BLOCK (3) or NK_QUANT_MXFP8 (4)");
  }
}

void check_y_dtype(const nk_rms_norm_fwd_args& a) {
  const nk_dtype y = a.y_dtype;
  if (y == NK_FLOAT8_E8M0) {
    fail_argument("y_dtype is " + dtype_text(y) +
                  "; float8_e8m0 holds MXFP8 scales only and is never an output dtype");
  }
  if (a.quant == NK_QUANT_NONE) {
    if (is_quantized_dtype(y)) {
      fail_argument("y_dtype is " + dtype_text(y) +
                    " but quant is NK_QUANT_NONE; an 8-bit output needs a quantization mode "
                    "(set quant to NK_QUANT_TENSOR, NK_QUANT_TOKEN, NK_QUANT_BLOCK or "
                    "NK_QUANT_MXFP8)");
    }
    if (!is_float_dtype(y)) {
      fail_argument("y_dtype is " + dtype_text(y) +
                    "; expected NK_FLOAT32 (0), NK_FLOAT16 (1) or NK_BFLOAT16 (2)");
    }
    return;
  }
  const bool int8_allowed = a.quant == NK_QUANT_TENSOR || a.quant == NK_QUANT_TOKEN;
  const bool ok = y == NK_FLOAT8_E4M3 || y == NK_FLOAT8_E5M2 || (int8_allowed && y == NK_INT8);
  if (!ok) {
    fail_argument("y_dtype is " + dtype_text(y) + "; quant " + mode_text(a.quant) +
                  " writes NK_FLOAT8_E4M3 (3)" +
                  (int8_allowed ? ", NK_FLOAT8_E5M2 (4) or NK_INT8 (5)"
                                : " or NK_FLOAT8_E5M2 (4) (int8 only with TENSOR or TOKEN)"));
  }
}

// With NK_QUANT_NONE every quant field must be unset.
void check_none_fields(const nk_rms_norm_fwd_args& a) {
  const char* set = a.scale ? "scale" : a.scales ? "scales" : a.amax ? "amax" : a.y_t ? "y_t"
                    : a.quant_block != 0 ? "quant_block" : a.scale_ub != 0.0f ? "scale_ub"
                                                                                : nullptr;
  if (set) {
    fail_argument(std::string(set) +
                  " is set but quant is NK_QUANT_NONE; quantization fields are only used with "
                  "a quant mode (set quant, or leave " + set + " unset)");
  }
}

void check_pointers(const nk_rms_norm_fwd_args& a) {
  const std::string mode = mode_text(a.quant);
  if (a.quant == NK_QUANT_TENSOR) {
    if (!a.scale) {
      fail_argument("scale pointer missing: scale is NULL; NK_QUANT_TENSOR multiplies by the "
                    "float32 scale[0] it points to (in the backend's memory)");
    }
    if (a.scales) {
      fail_argument("scales is given but quant is NK_QUANT_TENSOR, which writes no scales "
                    "(the per-tensor scale is the input `scale`)");
    }
    return;
  }
  if (!a.scales) {
    const std::string what = a.quant == NK_QUANT_TOKEN ? "one float32 scale per row"
                             : a.quant == NK_QUANT_BLOCK ? "one float32 scale per block"
                                                         : "one e8m0 scale byte per 32 elements";
    fail_argument("scales is NULL; " + mode + " writes " + what + " to it (required)");
  }
  if (a.scale) {
    fail_argument("scale is given but quant is " + mode +
                  ", which computes its scales; `scale` is read by NK_QUANT_TENSOR only");
  }
  if (a.y_t) {
    fail_argument("y_t is given but quant is " + mode +
                  "; the transposed output is written by NK_QUANT_TENSOR only");
  }
}

// Resolves quant_block to the block the mode uses (0 for TENSOR and TOKEN).
int64_t resolve_block(const nk_rms_norm_fwd_args& a) {
  const int64_t b = a.quant_block;
  switch (a.quant) {
    case NK_QUANT_BLOCK:
      if (b == 0) return kDefaultQuantBlock;
      if (b != 32 && b != 64 && b != 128) {
        fail_argument("quant_block is " + str(b) +
                      "; NK_QUANT_BLOCK supports 32, 64 or 128 (0 = 128)");
      }
      return b;
    case NK_QUANT_MXFP8:
      if (b != 0 && b != kMxfp8Block) {
        fail_argument("quant_block is " + str(b) +
                      "; NK_QUANT_MXFP8 blocks are always 32 elements (pass 0 or 32)");
      }
      return kMxfp8Block;
    default:
      if (b != 0) {
        fail_argument("quant_block is " + str(b) + " but quant is " + mode_text(a.quant) +
                      ", which has no blocks; expected 0");
      }
      return 0;
  }
}

void check_scale_ub(const nk_rms_norm_fwd_args& a) {
  const float ub = a.scale_ub;
  if (!std::isfinite(ub) || ub < 0.0f) {
    char text[128];
    std::snprintf(text, sizeof text, "scale_ub is %g; expected a finite value >= 0 (0 = none)",
                  static_cast<double>(ub));
    fail_argument(text);
  }
  if (ub != 0.0f && a.quant != NK_QUANT_TOKEN && a.quant != NK_QUANT_BLOCK) {
    char text[160];
    std::snprintf(text, sizeof text,
                  "scale_ub is %g but quant is %s; the bound applies to NK_QUANT_TOKEN and "
                  "NK_QUANT_BLOCK scales only (expected 0)",
                  static_cast<double>(ub), mode_text(a.quant).c_str());
    fail_argument(text);
  }
}

}  // namespace

void validate_quant_fields(nk_rms_norm_fwd_args& a) {
  check_mode(a.quant);
  check_y_dtype(a);
  if (a.quant == NK_QUANT_NONE) {
    check_none_fields(a);
    return;
  }
  check_pointers(a);
  a.quant_block = resolve_block(a);
  if (a.quant_block > 0 && a.hidden % a.quant_block != 0) {
    fail_argument("hidden is " + str(a.hidden) + "; " + mode_text(a.quant) + " with blocks of " +
                  str(a.quant_block) + " needs hidden to be a multiple of " +
                  str(a.quant_block) + " (there is no padding rule)");
  }
  check_scale_ub(a);
  if (a.y_t) {
    if (a.y_t_row_stride == 0) {
      a.y_t_row_stride = a.rows;
    } else if (a.y_t_row_stride < a.rows) {
      fail_argument("y_t_row_stride is " + str(a.y_t_row_stride) +
                    "; expected 0 (contiguous) or a stride >= rows (" + str(a.rows) +
                    "): y_t is [hidden, rows]");
    }
  }
}

}  // namespace normkit
