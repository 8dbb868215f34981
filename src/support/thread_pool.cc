#include "tlaloc/support/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <system_error>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace tlaloc {

namespace {
thread_local bool tls_in_parallel = false;

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// Spins until `done()` or `budget` has passed; true when done. A decode step issues hundreds of
// short parallel loops a few microseconds apart: waking a sleeping thread through the kernel
// costs tens of microseconds each time, so idle threads first spin for about as long as a
// typical gap, then sleep so that an idle process uses no CPU.
template <typename Done>
bool SpinUntil(const Done& done, std::chrono::microseconds budget) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      CpuRelax();
    }
    if (std::chrono::steady_clock::now() >= deadline) return done();
  }
}

int SpinMicroseconds() {
  // TLALOC_SPIN_US=0 turns spinning off (for machines where cores are oversubscribed).
  if (const char* env = std::getenv("TLALOC_SPIN_US")) return std::max(0, std::atoi(env));
  return 200;
}
}  // namespace

ThreadPool::ThreadPool(int num_threads) : spin_(SpinMicroseconds()) {
  if (num_threads <= 0)
    num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < num_threads; ++i) {
    try {
      workers_.emplace_back([this] { WorkerLoop(); });
    } catch (const std::system_error&) {
      // No room for another thread's stack (ulimit -v nearly used up) or the thread limit is
      // reached: a smaller pool still runs every chunk (the caller's thread takes part), where
      // an escaped exception would abort the process.
      break;
    }
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    published_.fetch_add(1, std::memory_order_release);
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::WorkerLoop() {
  uint64_t seen = 0;
  for (;;) {
    SpinUntil([&] { return published_.load(std::memory_order_acquire) != seen; }, spin_);
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    // A job whose chunks the caller already took is simply marked seen, so this thread goes
    // back to spinning for the next one instead of sleeping.
    seen = generation_;
    while (next_chunk_ < num_chunks_) {
      int64_t c = next_chunk_++;
      const auto* job = job_;
      int64_t begin = c * job_chunk_, end = std::min(job_n_, begin + job_chunk_);
      lock.unlock();
      tls_in_parallel = true;
      (*job)(begin, end);
      tls_in_parallel = false;
      lock.lock();
      if (++chunks_done_ == num_chunks_) {
        finished_.store(generation_, std::memory_order_release);
        done_cv_.notify_all();
      }
    }
  }
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain,
                             const std::function<void(int64_t, int64_t)>& body) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  int64_t max_chunks = std::min<int64_t>(size(), (n + grain - 1) / grain);
  if (max_chunks <= 1 || workers_.empty() || tls_in_parallel) {
    body(0, n);
    return;
  }
  std::unique_lock<std::mutex> lock(mu_);
  // One job at a time: wait if another thread is using the pool.
  done_cv_.wait(lock, [&] { return job_ == nullptr; });
  job_ = &body;
  job_n_ = n;
  job_chunk_ = (n + max_chunks - 1) / max_chunks;
  num_chunks_ = (n + job_chunk_ - 1) / job_chunk_;
  next_chunk_ = 0;
  chunks_done_ = 0;
  const uint64_t generation = ++generation_;
  published_.store(generation, std::memory_order_release);
  cv_.notify_all();
  while (next_chunk_ < num_chunks_) {
    int64_t c = next_chunk_++;
    int64_t begin = c * job_chunk_, end = std::min(job_n_, begin + job_chunk_);
    lock.unlock();
    tls_in_parallel = true;
    body(begin, end);
    tls_in_parallel = false;
    lock.lock();
    if (++chunks_done_ == num_chunks_) finished_.store(generation, std::memory_order_release);
  }
  if (chunks_done_ != num_chunks_) {
    // The last chunks are usually a few microseconds from done: spin before sleeping.
    lock.unlock();
    SpinUntil([&] { return finished_.load(std::memory_order_acquire) == generation; }, spin_);
    lock.lock();
    done_cv_.wait(lock, [&] { return chunks_done_ == num_chunks_; });
  }
  job_ = nullptr;
  num_chunks_ = 0;
  done_cv_.notify_all();
}

namespace {
// The pool is created lazily so that a command can size it from its flags first.
std::mutex g_default_pool_mu;
std::atomic<ThreadPool*> g_default_pool{nullptr};
int g_requested_threads = 0;  // 0: not requested, use the environment or the hardware

int HardwareThreads() {
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}
}  // namespace

ThreadPool& DefaultThreadPool() {
  if (ThreadPool* pool = g_default_pool.load(std::memory_order_acquire)) return *pool;
  std::lock_guard<std::mutex> lock(g_default_pool_mu);
  if (g_default_pool.load(std::memory_order_relaxed) == nullptr) {
    int n = g_requested_threads;
    if (n == 0)
      if (const char* env = std::getenv("TLALOC_NUM_THREADS")) n = std::atoi(env);
    g_default_pool.store(new ThreadPool(n), std::memory_order_release);
  }
  return *g_default_pool.load(std::memory_order_relaxed);
}

Status SetDefaultThreadPoolSize(int num_threads) {
  const int want = num_threads > 0 ? num_threads : HardwareThreads();
  std::lock_guard<std::mutex> lock(g_default_pool_mu);
  if (ThreadPool* pool = g_default_pool.load(std::memory_order_relaxed)) {
    if (pool->size() == want) return OkStatus();
    return FailedPrecondition("the thread pool already runs " + std::to_string(pool->size()) +
                              " threads; the thread count (" + std::to_string(want) +
                              ") must be set before anything runs");
  }
  g_requested_threads = want;
  return OkStatus();
}

}  // namespace tlaloc
