// The quantized part of `normkit check`: every quantization mode x y dtype x awkward shapes on
// each backend against the float64 quantized reference, one line per (case, backend).
#pragma once

#include <vector>

#include "check_backends.h"
#include "check_command.h"

namespace nktool {

// Prints the quantized cases' table and adds each (case, backend) to `tally` (an unavailable
// backend's cases count as skipped).
void run_quant_check(const CheckOptions& options, const std::vector<BackendChoice>& backends,
                     CheckTally& tally);

}  // namespace nktool
