// Minimal fork-join parallelism for the CPU backend: a fixed list of tasks, taken in order by a
// few std::threads. Results never depend on which thread ran a task, so the thread count can
// vary (machine size, NK_CPU_THREADS) without changing any output bit.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace normkit::cpu {

// Threads to use for `n_tasks` tasks that touch `total_elements` elements in all: 1 for small
// problems (thread start-up would dominate), else up to the machine's cores. NK_CPU_THREADS
// (a positive integer) overrides the machine's core count; it is read on every call.
int choose_threads(int64_t total_elements, int64_t n_tasks);

// Calls worker(task) for every task in [0, n_tasks) on `threads` threads (the caller is one of
// them). make_worker() is called once per thread and returns that thread's callable, so each
// thread can own its scratch memory. The first exception thrown by any worker is rethrown here
// after all threads have stopped.
template <typename MakeWorker>
void run_tasks(int64_t n_tasks, int threads, MakeWorker make_worker) {
  if (n_tasks <= 0) return;
  threads = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, n_tasks)));
  if (threads == 1) {
    auto worker = make_worker();
    for (int64_t t = 0; t < n_tasks; ++t) worker(t);
    return;
  }
  std::atomic<int64_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto thread_main = [&] {
    try {
      auto worker = make_worker();
      for (int64_t t; !failed.load(std::memory_order_relaxed) &&
                      (t = next.fetch_add(1, std::memory_order_relaxed)) < n_tasks;) {
        worker(t);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
      failed = true;
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(threads - 1));
  try {
    for (int i = 1; i < threads; ++i) pool.emplace_back(thread_main);
  } catch (...) {
    // Could not start a thread: run with the ones we have (the caller still takes tasks).
  }
  thread_main();
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace normkit::cpu
