// Thread-local error message behind nk_last_error(), and the exception that carries a status
// from deep inside a backend up to the C API boundary.
#pragma once

#include <stdexcept>
#include <string>

#include "normkit/normkit.h"

namespace normkit {

// Thrown inside normkit; caught at the C API boundary and turned into status + message.
class Error : public std::runtime_error {
 public:
  Error(nk_status status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  nk_status status() const { return status_; }

 private:
  nk_status status_;
};

// Throws Error(NK_ERROR_INVALID_ARGUMENT, message).
[[noreturn]] void fail_argument(const std::string& message);

void set_last_error(const std::string& message);
void clear_last_error();
const char* last_error();

}  // namespace normkit
