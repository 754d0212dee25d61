#include "backend/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>

#include "backend/cpu/simd.h"  // _mm_pause

namespace channel {
namespace {

// How long an idle worker spins before sleeping. Long enough to bridge the gap between
// consecutive matmuls of one decode step, short enough not to burn a shared core.
constexpr auto kSpinTime = std::chrono::microseconds(200);
// Chunks per thread: enough to rebalance when one thread runs late, few enough that the
// shared claim counter stays cheap.
constexpr int64_t kChunksPerThread = 4;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

inline uint32_t seq_of(uint64_t work) {
  return static_cast<uint32_t>(work >> 32);
}

// The pool (and thread index) whose job the current thread is running, to detect nesting.
thread_local const ThreadPool* tls_pool = nullptr;
thread_local int tls_index = 0;

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::thread::hardware_concurrency());
  n_threads_ = std::max(n_threads, 1);
  workers_.reserve(n_threads_ - 1);
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_main(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
    work_.fetch_add(uint64_t{1} << 32);  // wake spinners
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_chunks(uint32_t seq, int index) {
  const ThreadPool* saved_pool = tls_pool;
  const int saved_index = tls_index;
  tls_pool = this;
  tls_index = index;
  uint64_t work = work_.load(std::memory_order_acquire);
  for (;;) {
    if (seq_of(work) != seq) break;
    const int64_t chunk = static_cast<int64_t>(work & 0xffffffffu);
    if (chunk >= n_chunks_.load(std::memory_order_relaxed)) break;
    if (!work_.compare_exchange_weak(work, work + 1, std::memory_order_acq_rel)) continue;
    const int64_t n_chunks = n_chunks_.load(std::memory_order_relaxed);  // this job's now
    const int64_t begin = n_items_ * chunk / n_chunks;
    const int64_t end = n_items_ * (chunk + 1) / n_chunks;
    try {
      (*fn_)(begin, end, index);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mu_);
      if (!error_) error_ = std::current_exception();
    }
    done_.fetch_add(1, std::memory_order_acq_rel);
    work = work_.load(std::memory_order_acquire);
  }
  tls_pool = saved_pool;
  tls_index = saved_index;
}

void ThreadPool::worker_main(int index) {
  uint32_t seen = 0;
  for (;;) {
    uint64_t work = work_.load(std::memory_order_acquire);
    if (seq_of(work) == seen) {
      const auto deadline = std::chrono::steady_clock::now() + kSpinTime;
      for (int spins = 0; seq_of(work) == seen; ++spins) {
        cpu_relax();
        work = work_.load(std::memory_order_acquire);
        if ((spins & 63) == 63 && std::chrono::steady_clock::now() > deadline) break;
      }
    }
    if (seq_of(work) == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      sleepers_.fetch_add(1);  // seq_cst: pairs with the caller's publish-then-check
      cv_.wait(lock, [&] { return seq_of(work_.load()) != seen; });
      sleepers_.fetch_sub(1);
      work = work_.load(std::memory_order_acquire);
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = seq_of(work);
    run_chunks(seen, index);
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  // Nested, no workers, or a single item (nothing to share; publishing it would only let a
  // worker race the caller for it and make the caller wait on that worker): run inline.
  if (tls_pool == this || n_threads_ == 1 || n == 1) {
    fn(0, n, tls_pool == this ? tls_index : 0);
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mu_);
  // Retire the previous job's sequence number before touching the job fields: a worker still
  // leaving that job could otherwise pass its chunk check against the new n_chunks_ and claim
  // a chunk of the new job under the old number (running it twice, over-counting done_).
  // Chunk index 0xffffffff is never claimable.
  const uint32_t retired = seq_of(work_.load(std::memory_order_relaxed)) + 1;
  work_.store((static_cast<uint64_t>(retired) << 32) | 0xffffffffu);
  fn_ = &fn;
  n_items_ = n;
  const int64_t n_chunks = std::min<int64_t>(n, n_threads_ * kChunksPerThread);
  n_chunks_.store(n_chunks, std::memory_order_relaxed);
  error_ = nullptr;
  done_.store(0, std::memory_order_relaxed);
  // Publish: new sequence number, chunk 0 (seq_cst, so the sleepers_ check below is ordered).
  const uint32_t seq = retired + 1;
  work_.store(static_cast<uint64_t>(seq) << 32);
  if (sleepers_.load() > 0) {
    { std::lock_guard<std::mutex> lock(mu_); }  // a worker between its check and wait sees it
    cv_.notify_all();
  }
  run_chunks(seq, 0);
  // Every chunk is claimed; wait for the ones other threads are still running.
  const auto start = std::chrono::steady_clock::now();
  for (int spins = 0; done_.load(std::memory_order_acquire) != n_chunks; ++spins) {
    cpu_relax();
    if ((spins & 255) == 255 && std::chrono::steady_clock::now() - start > kSpinTime) {
      std::this_thread::yield();  // the other thread may have been descheduled mid-chunk
    }
  }
  fn_ = nullptr;
  if (error_) std::rethrow_exception(error_);
}

}  // namespace channel
