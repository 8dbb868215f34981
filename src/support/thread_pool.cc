#include "tlaloc/support/thread_pool.h"

#include <algorithm>
#include <cstdlib>

namespace tlaloc {

namespace {
thread_local bool tls_in_parallel = false;
}

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::WorkerLoop() {
  uint64_t seen = 0;
  for (;;) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return stop_ || (generation_ != seen && next_chunk_ < num_chunks_); });
    if (stop_) return;
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
      if (++chunks_done_ == num_chunks_) done_cv_.notify_all();
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
  ++generation_;
  cv_.notify_all();
  while (next_chunk_ < num_chunks_) {
    int64_t c = next_chunk_++;
    int64_t begin = c * job_chunk_, end = std::min(job_n_, begin + job_chunk_);
    lock.unlock();
    tls_in_parallel = true;
    body(begin, end);
    tls_in_parallel = false;
    lock.lock();
    ++chunks_done_;
  }
  done_cv_.wait(lock, [&] { return chunks_done_ == num_chunks_; });
  job_ = nullptr;
  num_chunks_ = 0;
  done_cv_.notify_all();
}

ThreadPool& DefaultThreadPool() {
  static ThreadPool* pool = [] {
    int n = 0;
    if (const char* env = std::getenv("TLALOC_NUM_THREADS")) n = std::atoi(env);
    return new ThreadPool(n);
  }();
  return *pool;
}

}  // namespace tlaloc
