// The host tensors of one `normkit check` case (fresh random inputs, poisoned outputs) and the
// API argument structs that point into them. Pointers are produced by a caller-supplied
// mapping, so the same arguments describe host memory (CPU backend, reference) or device
// copies (CUDA backend).
#pragma once

#include <functional>
#include <vector>

#include "check_cases.h"
#include "host_tensor.h"
#include "normkit/normkit.h"

namespace nktool {

struct CaseTensors {
  // Forward. residual/residual_out only with a residual; y is empty when it aliases x and
  // residual_out is empty when it aliases residual (in-place cases).
  HostTensor x, residual, weight, bias;
  HostTensor y, residual_out, rstd;
  // Backward: its own input s (bwd_x) and the float32 rstd of it, so the backward is checked
  // independently of the forward's results. dx is empty when it aliases dy.
  HostTensor dy, bwd_x, bwd_rstd, dresidual_out;
  HostTensor dx, dweight, dbias;

  // Where each output lands (the aliased input for in-place cases); nullptr when not requested.
  HostTensor* y_out() { return y.empty() ? &x : &y; }
  HostTensor* residual_out_out() {
    return residual.empty() ? nullptr : residual_out.empty() ? &residual : &residual_out;
  }
  HostTensor* dx_out() { return dx.empty() ? &dy : &dx; }

  std::vector<HostTensor*> inputs();   // non-empty inputs, aliased ones included
  std::vector<HostTensor*> outputs();  // non-empty dedicated outputs (not the aliased inputs)
  std::vector<HostTensor*> all();

  // Restores every input from its snapshot and poisons every output (before a backend runs).
  void reset_for_run();
};

CaseTensors make_case_tensors(const CheckCase& c);

using PointerMap = std::function<void*(HostTensor&)>;

// Arguments of the case's forward / backward with pointers from `ptr` (empty tensors -> NULL).
nk_rms_norm_fwd_args make_fwd_args(const CheckCase& c, CaseTensors& t, const PointerMap& ptr);
nk_rms_norm_bwd_args make_bwd_args(const CheckCase& c, CaseTensors& t, const PointerMap& ptr);

// Host pointers, for the reference and the CPU backend.
void* host_pointer(HostTensor& t);

}  // namespace nktool
