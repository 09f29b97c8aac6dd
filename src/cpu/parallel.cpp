#include "cpu/parallel.h"

#include <cstdlib>

namespace normkit::cpu {
namespace {

// Below this many elements per thread, starting a thread costs more than it saves.
constexpr int64_t kMinElementsPerThread = 1 << 15;
constexpr int kMaxThreads = 64;

int machine_threads() {
  if (const char* env = std::getenv("NK_CPU_THREADS")) {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && n > 0) return static_cast<int>(std::min<long>(n, kMaxThreads));
  }
  // Asked once: hardware_concurrency() reads /sys/devices/system/cpu/online on every call
  // (three system calls, 2-3 us of each small C API call on the CPU backend).
  static const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(std::min<unsigned>(hw, kMaxThreads));
}

}  // namespace

int choose_threads(int64_t total_elements, int64_t n_tasks) {
  const int64_t by_size = std::max<int64_t>(1, total_elements / kMinElementsPerThread);
  const int64_t n = std::min<int64_t>({by_size, n_tasks, machine_threads()});
  return static_cast<int>(std::max<int64_t>(1, n));
}

}  // namespace normkit::cpu
