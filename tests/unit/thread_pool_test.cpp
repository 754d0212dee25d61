// ThreadPool: every index runs exactly once in contiguous per-thread chunks, exceptions
// propagate, nested and concurrent calls work, and rapid-fire dispatch stays correct.
#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/thread_pool.h"

namespace channel {
namespace {

TEST(ThreadPool, SizeDefaultsToHardwareConcurrency) {
  ThreadPool pool(0);
  EXPECT_GE(pool.size(), 1);
  EXPECT_EQ(ThreadPool(3).size(), 3);
}

TEST(ThreadPool, CoversEveryIndexOnceInContiguousChunks) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 3, 4, 7, 64, 1001}) {
      std::vector<std::atomic<int>> hits(n);
      std::vector<std::atomic<int>> busy(threads);  // thread indices are never shared
      pool.parallel_for(n, [&](int64_t begin, int64_t end, int t) {
        ASSERT_GE(t, 0);
        ASSERT_LT(t, threads);
        ASSERT_LT(begin, end);
        EXPECT_EQ(busy[t].fetch_add(1), 0);
        for (int64_t i = begin; i < end; ++i) hits[i].fetch_add(1);
        busy[t].fetch_sub(1);
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
    }
  }
}

TEST(ThreadPool, ZeroItemsCallsNothing) {
  ThreadPool pool(2);
  bool called = false;
  pool.parallel_for(0, [&](int64_t, int64_t, int) { called = true; });
  EXPECT_FALSE(called);
}

TEST(ThreadPool, RapidDispatchStaysCorrect) {
  ThreadPool pool(2);
  std::atomic<int64_t> sum{0};
  for (int iter = 0; iter < 3000; ++iter) {
    pool.parallel_for(10, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) sum.fetch_add(i);
    });
  }
  EXPECT_EQ(sum.load(), 3000 * 45);
}

// A job with more chunks right after one with fewer: a worker still leaving the old job
// must not claim a chunk of the new one under the old sequence number (that ran a chunk
// twice and over-counted completions, so parallel_for never returned).
TEST(ThreadPool, GrowingJobsRunEachChunkOnce) {
  ThreadPool pool(2);
  std::vector<std::atomic<int>> hits(64);
  for (int iter = 0; iter < 50000; ++iter) {
    const int64_t n = iter % 2 ? 64 : 1;
    for (int64_t i = 0; i < n; ++i) hits[i].store(0);
    pool.parallel_for(n, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "iter " << iter;
  }
}

TEST(ThreadPool, WakesWorkersAfterTheyFallAsleep) {
  ThreadPool pool(3);
  for (int iter = 0; iter < 3; ++iter) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // longer than the spin phase
    std::atomic<int> count{0};
    pool.parallel_for(3,
                      [&](int64_t b, int64_t e, int) { count.fetch_add(static_cast<int>(e - b)); });
    EXPECT_EQ(count.load(), 3);
  }
}

TEST(ThreadPool, RethrowsAnExceptionAfterAllChunksFinish) {
  ThreadPool pool(3);
  std::atomic<int> finished{0};
  EXPECT_THROW(pool.parallel_for(3,
                                 [&](int64_t b, int64_t, int) {
                                   if (b == 1) throw std::runtime_error("boom");
                                   finished.fetch_add(1);
                                 }),
               std::runtime_error);
  EXPECT_EQ(finished.load(), 2);  // the other chunks still ran
  std::atomic<int> count{0};      // still usable afterwards
  pool.parallel_for(6,
                    [&](int64_t b, int64_t e, int) { count.fetch_add(static_cast<int>(e - b)); });
  EXPECT_EQ(count.load(), 6);
}

TEST(ThreadPool, NestedCallsRunInline) {
  ThreadPool pool(2);
  std::atomic<int> inner{0};
  pool.parallel_for(2, [&](int64_t, int64_t, int t) {
    pool.parallel_for(5, [&](int64_t b, int64_t e, int t2) {
      EXPECT_EQ(t2, t);
      inner.fetch_add(static_cast<int>(e - b));
    });
  });
  EXPECT_EQ(inner.load(), 10);
}

TEST(ThreadPool, ConcurrentCallersAreSerialised) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  auto caller = [&] {
    for (int i = 0; i < 500; ++i) {
      pool.parallel_for(8, [&](int64_t b, int64_t e, int) { total.fetch_add(e - b); });
    }
  };
  std::thread a(caller), b(caller);
  a.join();
  b.join();
  EXPECT_EQ(total.load(), 2 * 500 * 8);
}

}  // namespace
}  // namespace channel
