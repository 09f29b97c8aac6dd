// Runs one quantized `normkit check` case (the forward only) on one backend. On return the
// case's host output tensors hold what the backend wrote (copied back from the device for
// CUDA), padding and guard bytes included.
#pragma once

#include "check_backend_run.h"
#include "check_quant_cases.h"
#include "check_quant_tensors.h"
#include "normkit/normkit.h"

namespace nktool {

BackendRunResult run_quant_case_on_backend(const QuantCheckCase& c, QuantCaseTensors& t,
                                           nk_backend backend);

}  // namespace nktool
