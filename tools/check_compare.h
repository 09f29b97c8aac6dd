// Judging one `normkit check` run: the float64 reference's results, every output compared with
// them (normkit::ref::compare with normkit::ref::tolerance_for), and the integrity checks
// (nothing written outside an output's elements, no input modified unless it is aliased).
#pragma once

#include <string>
#include <vector>

#include "check_cases.h"
#include "check_tensors.h"
#include "reference/reference.h"

namespace nktool {

struct ExpectedResults {
  normkit::ref::FwdResult fwd;
  normkit::ref::BwdResult bwd;
  // rms(rstd * dy * w_eff) / rms(dx): > 1 when dx cancels (tiny hidden); widens dx's tolerance.
  double dx_conditioning = 1;
};

// Must run on pristine inputs (before any backend ran, since in-place cases overwrite inputs).
ExpectedResults compute_expected(const CheckCase& c, CaseTensors& t);

struct OutputCheck {
  const char* name = "";  // short column name: y, res, rstd, dx, dw, db
  bool present = false;   // false: the case does not request this output
  normkit::ref::Comparison comparison;
};

struct CaseVerdict {
  std::vector<OutputCheck> outputs;   // always the six outputs above, in that order
  std::vector<std::string> problems;  // integrity failures, one message each
  bool passed() const;
};

CaseVerdict judge(const CheckCase& c, CaseTensors& t, const ExpectedResults& expected);

// One tensor of a case for the integrity checks, and whether the run may change it.
struct IntegrityItem {
  const char* name;
  HostTensor* tensor;
  bool may_change;
};

// Appends a message to `problems` for every non-empty tensor with bytes written outside its
// elements (row padding, guards, misalignment offset), and for every one that changed although
// it may not. Shared by the unquantized and the quantized check.
void check_integrity(const std::vector<IntegrityItem>& items, std::vector<std::string>& problems);

}  // namespace nktool
