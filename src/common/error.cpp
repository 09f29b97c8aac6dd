#include "common/error.h"

namespace normkit {
namespace {
thread_local std::string t_last_error;
}

void fail_argument(const std::string& message) {
  throw Error(NK_ERROR_INVALID_ARGUMENT, message);
}

void set_last_error(const std::string& message) { t_last_error = message; }
void clear_last_error() { t_last_error.clear(); }
const char* last_error() { return t_last_error.c_str(); }

}  // namespace normkit
