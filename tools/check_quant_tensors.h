// The host tensors of one quantized `normkit check` case (fresh random inputs, the TENSOR
// scale as a one-element input tensor, poisoned outputs) and the forward's argument struct
// pointing into them (or into device copies, through a PointerMap as in check_tensors.h).
#pragma once

#include <vector>

#include "check_quant_cases.h"
#include "check_tensors.h"
#include "host_tensor.h"
#include "normkit/normkit.h"

namespace nktool {

struct QuantCaseTensors {
  // Inputs. scale: TENSOR only, [1] float32, so that it travels to the device like any input.
  HostTensor x, residual, weight, bias, scale;
  // Outputs. residual_out is empty when it aliases residual; scales empty for TENSOR; amax and
  // y_t empty when not requested.
  HostTensor y, residual_out, rstd, scales, amax, y_t;
  float scale_value = 0.0f;  // TENSOR: what `scale` holds
  float scale_ub = 0.0f;     // TOKEN/BLOCK: the bound passed (0 = none)

  HostTensor* residual_out_out() {
    return residual.empty() ? nullptr : residual_out.empty() ? &residual : &residual_out;
  }

  std::vector<HostTensor*> inputs();   // non-empty inputs (residual included when aliased)
  std::vector<HostTensor*> outputs();  // non-empty dedicated outputs
  std::vector<HostTensor*> all();

  // Restores every input from its snapshot and poisons every output (before a backend runs).
  void reset_for_run();
};

// Draws the inputs, then sets the TENSOR scale and the TOKEN/BLOCK scale_ub from the float64
// forward of those inputs, so that they bind as the case asks (saturation, a bound on about
// half the scales).
QuantCaseTensors make_quant_case_tensors(const QuantCheckCase& c);

// The case's quantized forward with pointers from `ptr` (empty tensors -> NULL).
nk_rms_norm_fwd_args make_quant_fwd_args(const QuantCheckCase& c, QuantCaseTensors& t,
                                         const PointerMap& ptr);

}  // namespace nktool
