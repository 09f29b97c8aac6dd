// The backend-specific half of `normkit bench`: memory, timing and the copy ceiling. One runner
// per run; the command drives it shape by shape.
#pragma once

#include <memory>
#include <string>

#include "bench_types.h"
#include "normkit/normkit.h"

namespace nktool {

// Throws std::runtime_error naming `call`, the status, `context` (shape and dtype) and
// nk_last_error() unless status is NK_SUCCESS.
void check_bench_status(nk_status status, const char* call, const std::string& context);

class BenchRunner {
 public:
  virtual ~BenchRunner() = default;
  virtual std::string device_name() const = 0;
  virtual std::string timing_method() const = 0;  // one line for the header
  virtual CopyCeiling measure_copy() = 0;
  // A copy moving `bytes` (half read, half written), timed as run() times a call.
  virtual TimingStats time_copy(double bytes) = 0;
  // Times the forward and/or backward of one shape. Throws std::runtime_error naming what
  // failed (CUDA call or normkit status) with the shape and dtype.
  virtual ShapeResult run(const Shape& shape, bool explain) = 0;
};

// `pool_elements`: size of the random value pool (the largest tensor, capped by the caller).
std::unique_ptr<BenchRunner> make_cpu_runner(const BenchConfig& config, size_t pool_elements);

// Throws std::runtime_error when this build has no CUDA backend or no device is usable.
std::unique_ptr<BenchRunner> make_cuda_runner(const BenchConfig& config, size_t pool_elements);

}  // namespace nktool
