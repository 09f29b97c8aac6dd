// Runs one `normkit check` case (forward, then backward) on one backend. On return the case's
// host output tensors hold what the backend wrote (copied back from the device for CUDA),
// padding and guard bytes included, so the caller can compare and look for stray writes.
#pragma once

#include <string>

#include "check_cases.h"
#include "check_tensors.h"
#include "normkit/normkit.h"

namespace nktool {

struct BackendRunResult {
  bool ok = false;
  std::string error;  // what failed (an nk_status with nk_last_error(), or a CUDA call)
};

BackendRunResult run_case_on_backend(const CheckCase& c, CaseTensors& t, nk_backend backend);

}  // namespace nktool
