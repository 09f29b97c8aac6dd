// The CPU backend's task runner (src/cpu/parallel.h) on its persistent pool: every task runs
// exactly once whatever the thread count, a worker's exception reaches the caller, callers on
// several host threads at once (the pool busy with one of them) all finish their tasks, and a
// child of fork() (none of its parent's pool threads) runs its calls on a pool of its own.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <cstdint>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "cpu/parallel.h"

namespace normkit::cpu {
namespace {

// Runs n_tasks tasks on `threads` threads; returns how often each task ran and, in
// thread_count, how many threads made a worker.
std::vector<int> run_counting(int64_t n_tasks, int threads, int* thread_count = nullptr) {
  std::vector<std::atomic<int>> runs(static_cast<size_t>(n_tasks));
  std::atomic<int> workers{0};
  run_tasks(n_tasks, threads, [&] {
    workers.fetch_add(1);
    return [&](int64_t task) { runs[static_cast<size_t>(task)].fetch_add(1); };
  });
  if (thread_count) *thread_count = workers.load();
  std::vector<int> counts;
  for (const auto& r : runs) counts.push_back(r.load());
  return counts;
}

TEST(Parallel, EveryTaskRunsOnceOnAnyThreadCount) {
  for (const int threads : {1, 2, 3, 8, 63, 64, 200}) {
    for (const int64_t n_tasks : {int64_t{1}, int64_t{2}, int64_t{7}, int64_t{1000}}) {
      int made = 0;
      const std::vector<int> counts = run_counting(n_tasks, threads, &made);
      for (int64_t t = 0; t < n_tasks; ++t) {
        ASSERT_EQ(counts[static_cast<size_t>(t)], 1)
            << "task " << t << " of " << n_tasks << " on " << threads << " threads";
      }
      EXPECT_GE(made, 1);
      EXPECT_LE(made, std::min<int64_t>(threads, n_tasks));
    }
  }
}

TEST(Parallel, ZeroTasksRunNothing) {
  bool made = false;
  run_tasks(0, 4, [&] {
    made = true;
    return [](int64_t) {};
  });
  EXPECT_FALSE(made);
}

// Whether two tasks on two threads ran on two threads at once: each waits (up to 10 s) until
// the other has started, which only a second thread can make happen.
bool two_threads_at_once() {
  std::atomic<int> started{0};
  std::set<std::thread::id> ids;
  std::mutex ids_mutex;
  run_tasks(2, 2, [&] {
    return [&](int64_t) {
      {
        std::lock_guard<std::mutex> lock(ids_mutex);
        ids.insert(std::this_thread::get_id());
      }
      started.fetch_add(1);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (started.load() < 2 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::yield();
      }
    };
  });
  return started.load() == 2 && ids.size() == 2;
}

TEST(Parallel, SeveralThreadsTakeTasksWhenAsked) {
  // (The pool is idle here, so the call gets its helper.)
  EXPECT_TRUE(two_threads_at_once()) << "both tasks ran on one thread";
}

TEST(Parallel, WorkerExceptionReachesTheCaller) {
  for (const int threads : {1, 2, 4}) {
    std::atomic<int> ran{0};
    EXPECT_THROW(run_tasks(100, threads,
                           [&] {
                             return [&](int64_t task) {
                               ran.fetch_add(1);
                               if (task == 3) throw std::runtime_error("task 3 failed");
                               // (long enough that the others stop well before the end)
                               std::this_thread::sleep_for(std::chrono::microseconds(200));
                             };
                           }),
                 std::runtime_error)
        << threads << " threads";
    EXPECT_LT(ran.load(), 100) << "the other tasks stop after a failure";
    // The pool still serves the next call.
    const std::vector<int> counts = run_counting(50, threads);
    for (const int c : counts) ASSERT_EQ(c, 1);
  }
}

TEST(Parallel, CallersOnSeveralHostThreadsAllFinish) {
  // One caller at a time gets the pool; the others run their tasks alone. Either way each
  // call's tasks run exactly once.
  constexpr int kCallers = 4;
  constexpr int kCalls = 200;
  std::atomic<int> wrong{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&] {
      for (int call = 0; call < kCalls; ++call) {
        const std::vector<int> counts = run_counting(64, 3);
        for (const int n : counts) {
          if (n != 1) wrong.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(Parallel, ForkedChildRunsItsCalls) {
  // The parent's pool has threads; the child has none of them, must not wait for them, and
  // starts its own.
  ASSERT_EQ(run_counting(16, 2)[15], 1);
  const pid_t child = fork();
  ASSERT_NE(child, -1);
  if (child == 0) {
    const std::vector<int> counts = run_counting(500, 4);
    int wrong = 0;
    for (const int n : counts) wrong += n != 1;
    // Its own pool: a second thread takes tasks in the child too.
    _exit(wrong != 0 ? 1 : two_threads_at_once() ? 0 : 2);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // The parent's pool is unaffected.
  const std::vector<int> counts = run_counting(100, 2);
  for (const int c : counts) ASSERT_EQ(c, 1);
}

}  // namespace
}  // namespace normkit::cpu
