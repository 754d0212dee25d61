// ThreadPool: a fixed set of CPU worker threads for data-parallel loops. Built for low
// dispatch latency (a decode step issues hundreds of matmuls): idle workers spin briefly
// before sleeping on a condition variable, the calling thread takes part, and chunks are
// claimed dynamically, so a worker that the OS has not scheduled yet never holds the caller
// up (the caller simply runs that work itself).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace channel {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);  // n_threads <= 0: hardware concurrency
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Runs fn(begin, end, thread_index) over [0, n) split in contiguous chunks; returns when
  // all are done. Each chunk runs exactly once; a thread may run several chunks, and
  // thread_index (in [0, size()), 0 = the caller) names the thread running this one, so it
  // can index per-thread scratch. An exception thrown by fn is rethrown here (the first one,
  // once no chunk is running). Calls from several threads are serialised; a call from inside
  // fn runs the whole range inline with the same thread_index, and a call with n == 1 runs
  // inline on the caller (thread_index 0).
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn);

 private:
  void worker_main(int index);
  // Claims and runs chunks of job `seq` until none are left.
  void run_chunks(uint32_t seq, int index);

  int n_threads_;
  std::vector<std::thread> workers_;  // [n_threads_ - 1]; worker i has thread_index i + 1

  // The current job, written by the caller before it is published through work_.
  const std::function<void(int64_t, int64_t, int)>* fn_ = nullptr;
  int64_t n_items_ = 0;
  std::atomic<int64_t> n_chunks_{0};  // read before claiming, so atomic (the claim re-checks)
  std::exception_ptr error_;
  std::mutex error_mu_;

  // (job sequence number << 32) | next unclaimed chunk. Claiming compares the sequence, so
  // a worker that wakes late can never claim a chunk of a newer job by mistake.
  alignas(64) std::atomic<uint64_t> work_{0};
  alignas(64) std::atomic<int64_t> done_{0};  // chunks of the current job finished
  std::atomic<int> sleepers_{0};              // workers blocked on cv_
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::mutex call_mu_;  // one parallel_for at a time
};

}  // namespace channel
