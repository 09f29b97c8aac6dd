// How a failed C API call reaches Python: NormkitError carries the status and nk_last_error().
#pragma once

#include <stdexcept>
#include <string>

#include "normkit/normkit.h"

namespace normkit_py {

// Registered in module.cpp as normkit._C.NormkitError (a RuntimeError).
class NormkitError : public std::runtime_error {
 public:
  explicit NormkitError(const std::string& message) : std::runtime_error(message) {}
};

// Throws NormkitError("<what> failed (<status name>): <nk_last_error()>") unless status is
// NK_SUCCESS. Must run on the thread that made the call (the message is thread-local).
inline void check_status(nk_status status, const char* what) {
  if (status == NK_SUCCESS) return;
  throw NormkitError(std::string(what) + " failed (" + nk_status_name(status) +
                     "): " + nk_last_error());
}

}  // namespace normkit_py
