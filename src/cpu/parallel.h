// Minimal fork-join parallelism for the CPU backend: a fixed list of tasks, taken in order by a
// few threads. Results never depend on which thread ran a task, so the thread count can vary
// (machine size, NK_CPU_THREADS, a pool busy with another caller) without changing any output
// bit.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <vector>

namespace normkit::cpu {

// Threads to use for `n_tasks` tasks that touch `total_elements` elements in all: 1 for small
// problems (handing work to another thread would dominate), else up to the machine's cores.
// NK_CPU_THREADS (a positive integer) overrides the machine's core count; it is read on every
// call.
int choose_threads(int64_t total_elements, int64_t n_tasks);

// Runs body() on the calling thread and on up to `helpers` threads of the library's pool at
// once, and returns when every one of them has returned. The pool's threads start once and
// stay (starting a thread per call cost 10-75 us of each call on the 2-core CI machine); a child
// of fork() starts its own. A caller that finds the pool busy with another caller's work, or
// that cannot start its threads, runs body() alone: callers must not depend on the number of
// threads. body must not throw.
void run_on_pool(int helpers, void (*body)(void*), void* context);

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
  struct Shared {
    Shared(int64_t n, MakeWorker& make) : n_tasks(n), make_worker(make) {}
    int64_t n_tasks;
    MakeWorker& make_worker;
    std::atomic<int64_t> next{0};
    std::atomic<bool> failed{false};
    std::exception_ptr error;
    std::mutex error_mutex;
  } shared(n_tasks, make_worker);
  auto thread_main = [](void* context) {
    Shared& s = *static_cast<Shared*>(context);
    try {
      auto worker = s.make_worker();
      for (int64_t t; !s.failed.load(std::memory_order_relaxed) &&
                      (t = s.next.fetch_add(1, std::memory_order_relaxed)) < s.n_tasks;) {
        worker(t);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(s.error_mutex);
      if (!s.error) s.error = std::current_exception();
      s.failed = true;
    }
  };
  run_on_pool(threads - 1, thread_main, &shared);
  if (shared.error) std::rethrow_exception(shared.error);
}

}  // namespace normkit::cpu
