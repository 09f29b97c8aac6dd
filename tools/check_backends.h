// Which backends `normkit check` runs, and why one it was asked for cannot run here.
#pragma once

#include <string>
#include <vector>

#include "normkit/normkit.h"

namespace nktool {

struct BackendChoice {
  nk_backend backend;
  const char* name;
  bool available;
  std::string why_not;  // when unavailable
};

// "cpu", "cuda" or "all" (the CPU, and CUDA reported as unavailable when it cannot run).
std::vector<BackendChoice> choose_backends(const std::string& which);

// "cpu, cuda (unavailable: no CUDA device is available)".
std::string describe_backends(const std::vector<BackendChoice>& backends);

// "cuda: no CUDA device is available" for each unavailable backend, joined by "; ".
std::string unavailable_reasons(const std::vector<BackendChoice>& backends);

}  // namespace nktool
