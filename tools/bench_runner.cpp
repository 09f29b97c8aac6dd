#include "bench_runner.h"

#include <stdexcept>

namespace nktool {

void check_bench_status(nk_status status, const char* call, const std::string& context) {
  if (status != NK_SUCCESS) {
    throw std::runtime_error(std::string(call) + " returned " + nk_status_name(status) + " (" +
                             context + "): " + nk_last_error());
  }
}

}  // namespace nktool
