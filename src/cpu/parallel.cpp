#include "cpu/parallel.h"

#include <pthread.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <memory>
#include <system_error>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace normkit::cpu {
namespace {

// Below this many elements per thread, handing work to another thread costs more than it
// saves.
constexpr int64_t kMinElementsPerThread = 1 << 15;
constexpr int kMaxThreads = 64;
// How long a pool thread polls for its next job before it sleeps: calls that follow each other
// closely (the layers of a model) find it awake, while an idle process keeps no core busy.
constexpr std::chrono::microseconds kPollBeforeSleep{100};

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

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// The pool: threads started on demand (at most kMaxThreads - 1), each with a mailbox through
// which one caller at a time posts it a job. A job goes to the threads it names only, so a
// thread never sees another job's fields. Each posted job is claimed once, by its thread
// (which runs it and marks it done) or, when the caller has run out of tasks first, by the
// caller (which withdraws it): the caller waits only for threads that took their job, never
// for one still asleep or not yet scheduled, which then finds nothing to do.
class Pool {
 public:
  // Runs body on the caller and on `helpers` pool threads; false (nothing run) when another
  // caller's job holds the pool.
  bool run(int helpers, void (*body)(void*), void* context) {
    std::unique_lock<std::mutex> job(caller_, std::try_to_lock);
    if (!job.owns_lock()) return false;
    helpers = grow(helpers);
    for (int i = 0; i < helpers; ++i) {
      Mailbox& box = boxes_[i];
      box.body = body;
      box.context = context;
      box.posted.store(box.posted.load(std::memory_order_relaxed) + 1);  // (seq_cst: see wait)
    }
    if (sleepers_.load() > 0) {
      // (Taking the lock first: a thread between its check and its wait is then waiting.)
      { std::lock_guard<std::mutex> lock(sleep_mutex_); }
      wake_.notify_all();
    }
    body(context);
    for (int i = 0; i < helpers; ++i) {
      Mailbox& box = boxes_[i];
      const uint64_t posted = box.posted.load(std::memory_order_relaxed);
      uint64_t unclaimed = posted - 1;
      if (box.claimed.compare_exchange_strong(unclaimed, posted)) continue;  // withdrawn
      for (int polls = 0; box.done.load(std::memory_order_acquire) != posted; ++polls) {
        if (polls < 256) {
          cpu_relax();
        } else {
          std::this_thread::yield();  // (the helper may be waiting for this core)
        }
      }
    }
    return true;
  }

  // Ends every pool thread (the library is being unloaded, or the process exits).
  void stop() {
    std::lock_guard<std::mutex> job(caller_);
    stopping_.store(true);
    { std::lock_guard<std::mutex> lock(sleep_mutex_); }
    wake_.notify_all();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

 private:
  struct alignas(64) Mailbox {
    std::atomic<uint64_t> posted{0};   // jobs posted to its thread
    std::atomic<uint64_t> claimed{0};  // jobs claimed by the thread or withdrawn by the caller
    std::atomic<uint64_t> done{0};     // jobs its thread has finished
    void (*body)(void*) = nullptr;
    void* context = nullptr;
  };

  // Starts threads until `helpers` exist (under caller_); returns how many there are, fewer
  // where the system refused one.
  int grow(int helpers) {
    helpers = std::min(helpers, kMaxThreads - 1);
    while (static_cast<int>(threads_.size()) < helpers && !stopping_.load()) {
      try {
        const int index = static_cast<int>(threads_.size());
        threads_.emplace_back([this, index] { serve(index); });
      } catch (const std::system_error&) {
        break;
      }
    }
    return std::min(helpers, static_cast<int>(threads_.size()));
  }

  void serve(int index) {
    Mailbox& box = boxes_[index];
    uint64_t seen = 0;
    for (;;) {
      uint64_t posted;
      const auto polling_since = std::chrono::steady_clock::now();
      for (int polls = 0; (posted = box.posted.load(std::memory_order_acquire)) == seen; ++polls) {
        if (stopping_.load(std::memory_order_relaxed)) return;
        if (polls % 256 == 255 &&
            std::chrono::steady_clock::now() - polling_since > kPollBeforeSleep) {
          std::unique_lock<std::mutex> lock(sleep_mutex_);
          sleepers_.fetch_add(1);  // (seq_cst, before the check: pairs with run's post and test)
          wake_.wait(lock, [&] { return stopping_.load() || box.posted.load() != seen; });
          sleepers_.fetch_sub(1);
        } else {
          cpu_relax();
        }
      }
      seen = posted;
      uint64_t unclaimed = posted - 1;
      if (!box.claimed.compare_exchange_strong(unclaimed, posted)) continue;  // withdrawn
      box.body(box.context);
      box.done.store(posted, std::memory_order_release);
    }
  }

  std::mutex caller_;  // held by the caller whose job the pool runs
  std::unique_ptr<Mailbox[]> boxes_ = std::make_unique<Mailbox[]>(kMaxThreads);
  std::vector<std::thread> threads_;
  std::atomic<bool> stopping_{false};
  std::mutex sleep_mutex_;
  std::condition_variable wake_;
  std::atomic<int> sleepers_{0};
};

// The process's pool, made on first use and never freed (no thread outlives its memory); its
// threads are ended by ~PoolThreadsEnd when the library is unloaded or the process exits. A
// child of fork() has none of its parent's threads (and maybe a lock held by a job in flight):
// it drops the parent's pool, left as it is, and makes its own on first use.
std::atomic<Pool*> g_pool{nullptr};

Pool& pool() {
  static const bool fork_handler_registered =
      pthread_atfork(nullptr, nullptr, [] { g_pool.store(nullptr); }) == 0;
  (void)fork_handler_registered;
  Pool* current = g_pool.load();
  if (current) return *current;
  Pool* created = new Pool;
  if (g_pool.compare_exchange_strong(current, created)) return *created;
  delete created;  // another caller's came first (a pool starts its threads on its first job)
  return *current;
}

struct PoolThreadsEnd {
  ~PoolThreadsEnd() {
    if (Pool* p = g_pool.load()) p->stop();
  }
} g_pool_threads_end;

}  // namespace

int choose_threads(int64_t total_elements, int64_t n_tasks) {
  const int64_t by_size = std::max<int64_t>(1, total_elements / kMinElementsPerThread);
  const int64_t n = std::min<int64_t>({by_size, n_tasks, machine_threads()});
  return static_cast<int>(std::max<int64_t>(1, n));
}

void run_on_pool(int helpers, void (*body)(void*), void* context) {
  if (helpers <= 0 || !pool().run(helpers, body, context)) body(context);
}

}  // namespace normkit::cpu
