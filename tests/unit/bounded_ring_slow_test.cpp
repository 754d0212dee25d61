// 10^6 tokens through a micro bounded model (two swa_sink_v1 layers, one global layer) on the
// KV slot geometry (256 slots, 16 recall): session memory is constant. After warm-up the
// number of live heap blocks does not change and resident memory stays within 1%, with
// speculative verifies (decode_all + truncate_last) and probes mixed into the stream.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <new>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "gguf/gguf_writer.h"
#include "model/model.h"
#include "model/random_model.h"
#include "runtime/ring_session.h"
#include "support/micro_model.h"

namespace {
std::atomic<int64_t> g_live{0};    // heap blocks allocated and not yet freed
std::atomic<uint64_t> g_total{0};  // every allocation
}  // namespace

// Counts the heap blocks of this test binary.
void* operator new(size_t n) {
  g_live.fetch_add(1, std::memory_order_relaxed);
  g_total.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  if (p == nullptr) return;
  g_live.fetch_sub(1, std::memory_order_relaxed);
  std::free(p);
}
void operator delete(void* p, size_t) noexcept {
  operator delete(p);
}

namespace channel {
namespace {

size_t rss_bytes() {
  std::ifstream f("/proc/self/statm");
  size_t pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * 4096;
}

TEST(BoundedRingSlow, AMillionTokensInConstantMemory) {
  RandomModelSpec spec = test::micro_model_spec(Arch::bounded, 1);
  spec.window = 16;
  const std::vector<uint8_t> bytes = test::model_bytes(spec);
  const auto model = Model::load_from_memory(bytes, "micro-bounded.gguf");

  RingSessionConfig config;
  config.ring = RingConfig{256, 16, 8, 0};
  config.n_threads = 1;
  RingSession session(model, config);
  uint64_t evictions = 0;
  session.set_eviction_hook([&](const EvictionEvent&) { ++evictions; });
  std::vector<int32_t> system(40);
  for (size_t i = 0; i < system.size(); ++i) system[i] = static_cast<int32_t>(i % 300);
  session.append(SpanType::system, system);
  session.seal();

  constexpr uint64_t kTokens = 1000000;
  const size_t state_bytes = session.kv_bytes();
  int64_t live_warm = 0;
  uint64_t total_warm = 0;
  size_t rss_warm = 0;
  int32_t tok = 7;
  int32_t verify[5];
  for (uint64_t i = 0; i < kTokens;) {
    if (i % 23 == 0) {
      session.append(i % 2 ? SpanType::user : SpanType::response_sentence, {&tok, 1});
      ++i;
    } else if (i % 97 == 5) {  // a speculative verify of 5 tokens keeping 0..4 of the drafts
      for (int32_t& v : verify) v = tok = static_cast<int32_t>((tok * 31 + 17) % 300);
      session.decode_all(verify);
      const int drop = static_cast<int>(i % 5);
      session.truncate_last(drop);
      i += 5 - drop;
    } else if (i % 1009 == 7 && session.max_probe() >= 3) {  // a probe leaves nothing behind
      const int32_t probe[3] = {1, 2, 3};
      session.probe(probe);
      session.decode({&tok, 1});
      ++i;
    } else {
      session.decode({&tok, 1});
      ++i;
    }
    tok = static_cast<int32_t>((tok * 31 + 17) % 300);
    if (i >= 20000 && rss_warm == 0) {
      live_warm = g_live.load();
      total_warm = g_total.load();
      rss_warm = rss_bytes();
    }
  }
  const int64_t live_end = g_live.load();
  const uint64_t total_end = g_total.load();
  const size_t rss_end = rss_bytes();
  std::printf(
      "clock %llu, evictions %llu, max distance %llu, session state %zu bytes, live heap blocks "
      "%lld -> %lld, allocations after warm-up %llu (%.2f per token), rss %zu -> %zu\n",
      static_cast<unsigned long long>(session.ring().clock()),
      static_cast<unsigned long long>(evictions),
      static_cast<unsigned long long>(session.max_distance()), state_bytes,
      static_cast<long long>(live_warm), static_cast<long long>(live_end),
      static_cast<unsigned long long>(total_end - total_warm),
      static_cast<double>(total_end - total_warm) / (kTokens - 20000), rss_warm, rss_end);
  EXPECT_EQ(live_end, live_warm) << "heap blocks held after warm-up changed";
  EXPECT_LE(rss_end, rss_warm + rss_warm / 100) << "RSS grew by more than 1%";
  EXPECT_EQ(session.kv_bytes(), state_bytes);
  EXPECT_GT(session.ring().clock(), kTokens);
  EXPECT_LE(session.max_distance(), config.ring.n_slots);
  EXPECT_GT(evictions, 10000u);
}

}  // namespace
}  // namespace channel
