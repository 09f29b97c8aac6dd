// `normkit check`: every backend's results on random cases against the float64 reference:
// forward and backward with float outputs, then the quantized forward (check_quant_command.h).
#pragma once

#include <cstdint>
#include <string>

namespace nktool {

struct CheckOptions {
  std::string backend = "all";  // cpu | cuda | all
  bool quick = false;
  uint64_t seed = 1;
  bool verbose = false;
  bool quant_only = false;  // --quant: only the quantized-forward cases
};

// Outcomes of (case, backend) pairs.
struct CheckTally {
  int passed = 0, failed = 0, skipped = 0;
};

// Prints one line per (case, backend) and the summary line; returns the process exit code
// (0 only when nothing failed and something was checked).
int run_check(const CheckOptions& options);

}  // namespace nktool
