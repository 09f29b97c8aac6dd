// Judging one quantized `normkit check` run: the float64 quantized reference
// (normkit::ref::rms_norm_fwd_quant), the codes, scales, amax and y_t compared by its documented
// rule (normkit::ref::compare_quant), residual_out bit for bit, rstd within compare()'s
// tolerance, and the integrity checks (nothing written outside an output's elements, no input
// modified unless residual_out aliases it).
#pragma once

#include <string>
#include <vector>

#include "check_quant_cases.h"
#include "check_quant_tensors.h"
#include "reference/quant_reference.h"
#include "reference/reference.h"

namespace nktool {

struct QuantExpected {
  normkit::ref::QuantFwdResult result;
  double v_tolerance = 0;  // compare()'s bound for the float32 v of this case
};

// Must run on pristine inputs (before a backend ran: residual_out may overwrite residual).
QuantExpected compute_quant_expected(const QuantCheckCase& c, QuantCaseTensors& t);

struct QuantVerdict {
  normkit::ref::QuantComparison codes;  // y, scales, amax, y_t
  bool has_residual_out = false;
  normkit::ref::Comparison residual_out;  // tolerance 0: the rounded sum is exact
  normkit::ref::Comparison rstd;
  std::vector<std::string> problems;  // integrity failures, one message each
  bool passed() const;
};

// Compares what the backend left in t's output tensors (host copies) with `expected`.
QuantVerdict judge_quant(const QuantCheckCase& c, QuantCaseTensors& t,
                         const QuantExpected& expected);

}  // namespace nktool
