// A small fixed thread pool for data-parallel loops (ParallelFor). The interpreter splits large
// elementwise, reduce and matmul work over it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "tlaloc/support/status.h"

namespace tlaloc {

class ThreadPool {
 public:
  // num_threads <= 0: one per hardware thread.
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }
  // Runs body(begin, end) over chunks of [0, n) of at least `grain` items; the calling thread
  // takes part. Returns when all chunks are done. Nested calls run inline.
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body);

 private:
  void WorkerLoop();

  // How long idle threads spin before sleeping (TLALOC_SPIN_US, default 200).
  const std::chrono::microseconds spin_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable done_cv_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0, job_chunk_ = 0, next_chunk_ = 0, num_chunks_ = 0, chunks_done_ = 0;
  uint64_t generation_ = 0;
  // Lock-free mirrors of generation_ (the newest job) and of the newest finished job, for
  // spinning threads.
  std::atomic<uint64_t> published_{0}, finished_{0};
  bool stop_ = false;
};

// The process-wide pool (sized by SetDefaultThreadPoolSize, else TLALOC_NUM_THREADS, else the
// hardware), created on first use.
ThreadPool& DefaultThreadPool();

// Sizes the process-wide pool before its first use (num_threads <= 0: one per hardware thread),
// overriding TLALOC_NUM_THREADS. Fails once the pool exists with another size, so that a thread
// count given too late is reported instead of silently ignored.
Status SetDefaultThreadPoolSize(int num_threads);

}  // namespace tlaloc
