// `normkit check`: every backend's results on random cases against the float64 reference.
#pragma once

#include <cstdint>
#include <string>

namespace nktool {

struct CheckOptions {
  std::string backend = "all";  // cpu | cuda | all
  bool quick = false;
  uint64_t seed = 1;
  bool verbose = false;
};

// Prints one line per (case, backend) and the summary line; returns the process exit code
// (0 only when nothing failed and something was checked).
int run_check(const CheckOptions& options);

}  // namespace nktool
