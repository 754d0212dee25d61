// 10^6 tokens through the default geometry: the largest attention distance stays within
// n_slots, the ring allocates nothing after warm-up, and at clocks near 10^6 the ring's
// attention (keys rotated at clock 10^6, queries rotated per group) still equals the oracle.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "support/kv_oracle.h"
#include "kv/slot_attention.h"
#include "kv/slot_ring.h"
#include "kv/virtual_positions.h"

namespace {
std::atomic<uint64_t> g_allocations{0};
}  // namespace

// Counts every allocation of the process (this test binary only).
void* operator new(size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, size_t) noexcept {
  std::free(p);
}

namespace channel {
namespace {

constexpr uint64_t kTokens = 1000000;

uint64_t lcg(uint64_t& s) {
  return (s = s * 6364136223846793005ull + 1442695040888963407ull) >> 33;
}

TEST(KvPositionsSlow, MaxDistanceStaysWithinTheGeometryForAMillionTokens) {
  const RingConfig config{4096, 128, 16, 0};
  SlotRing ring(config);
  uint64_t evicted = 0;
  ring.set_eviction_hook([&](const EvictionEvent& ev) { evicted += ev.span.slot_count; });
  ring.begin_span(SpanType::system);
  for (int i = 0; i < 700; ++i) ring.append_token();
  ring.seal();
  std::vector<SlotRun> runs;
  runs.reserve(config.n_recall + 2);
  uint64_t rng = 3, max_distance = 0, episode = 1, allocations_after_warmup = 0;
  for (uint64_t t = 0; t < kTokens; ++t) {
    if (t == 20000) allocations_after_warmup = g_allocations.load();
    const uint64_t r = lcg(rng) % 1000;
    if (r < 60) ring.begin_span(static_cast<SpanType>(1 + r % 6));
    if (r == 999) ring.begin_span(SpanType::tool_result), rng += 1;  // sometimes very long spans
    if (r >= 900 && r < 903) {
      const uint32_t n = 1 + lcg(rng) % 16;
      if (ring.recall_free_run() >= n) ring.activate_recall(episode++, n, lcg(rng));
    }
    if (r >= 903 && r < 906 && !ring.recall_episodes().empty())
      ring.deactivate_recall(ring.recall_episodes()[0].id);
    if (r >= 906 && r < 909 && ring.free_window() >= 4) {
      const ProbeMark mark = ring.begin_probe();
      for (int i = 0; i < 4; ++i) ring.append_token();
      ring.rollback_clock(mark);
    }
    if (ring.window_live() == 0) ring.begin_span(SpanType::user);
    const uint32_t slot = ring.append_token();
    ASSERT_EQ(ring.geometry().tier_of(slot), Tier::window);
    const QueryView view = global_runs(ring, ring.clock() - 1, runs);
    max_distance = std::max(max_distance, view.max_distance);
    ASSERT_LE(view.max_distance, config.n_slots - 1u) << "clock " << ring.clock();
  }
  EXPECT_EQ(g_allocations.load(), allocations_after_warmup) << "allocations after warm-up";
  EXPECT_GT(evicted, kTokens - 4096);
  EXPECT_LE(max_distance, config.n_slots);
  std::printf("clock %llu, max distance %llu (n_slots %u), evicted spans %llu\n",
              static_cast<unsigned long long>(ring.clock()),
              static_cast<unsigned long long>(max_distance), config.n_slots,
              static_cast<unsigned long long>(ring.evicted_spans()));
}

void fill(uint64_t key, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint64_t z = key * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull + 1;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    out[i] = static_cast<float>(static_cast<double>(z >> 11) / 9007199254740992.0 * 2.0 - 1.0);
  }
}

// A small geometry streamed to 10^6 with K/V written every token; at the end the ring's
// attention over keys rotated at clocks near 10^6 equals the oracle's at virtual positions.
TEST(KvPositionsSlow, AttentionAtClockAMillionEqualsTheOracle) {
  constexpr uint32_t kHeads = 2, kKv = 1, kHd = 64;
  const RingConfig config{64, 8, 0, 0};
  const RopeFreqs rope = RopeFreqs::make(RopeStyle::normal, kHd, 10000.0);
  const SlotAttnShape shape{kHeads, kKv, kHd, config.n_slots};
  std::vector<float> k(size_t{config.n_slots} * kHd), v(k.size());  // [1][n_slots][hd]
  const auto write = [&](uint32_t slot, uint64_t content, double pos) {
    float raw[kHd];
    fill(content * 2, raw, kHd);
    rope_rotate_at(rope, pos, raw, &k[size_t{slot} * kHd], 1, kHd);
    fill(content * 2 + 1, &v[size_t{slot} * kHd], kHd);
  };
  SlotRing ring(config);
  ring.begin_span(SpanType::system);
  for (uint64_t c = 0; c < 5; ++c) {
    const uint32_t slot = ring.append_token();
    write(slot, c, static_cast<double>(c));
  }
  ring.seal();
  uint64_t rng = 11;
  SlotAttnScratch scratch;
  std::vector<SlotRun> runs;
  std::vector<float> q(kHeads * kHd), got(q.size()), want(q.size());
  for (uint64_t t = 0; t < kTokens; ++t) {
    if (lcg(rng) % 8 == 0) ring.begin_span(SpanType::response_sentence);
    const uint64_t clock = ring.clock();
    const uint32_t slot = ring.append_token();
    write(slot, clock, static_cast<double>(clock));
    if (t + 1 == kTokens / 2) {
      const uint32_t first = ring.activate_recall(42, 3, 1234);
      for (uint32_t i = 0; i < 3; ++i) write(first + i, (1ull << 50) + i, 1234.0 + i);
    }
    if (t + 200 < kTokens) continue;
    fill(clock * 7 + 3, q.data(), q.size());
    global_runs(ring, clock, runs);
    slot_attention(shape, rope, q.data(), k.data(), v.data(), runs, 0.125f, got.data(), scratch);
    QueryView view;
    const std::vector<SlotPosition> pos = global_positions(ring, clock, &view);
    std::vector<float> raw(pos.size() * kHd);
    std::vector<OracleKv> keys;
    for (size_t j = 0; j < pos.size(); ++j) {
      const bool recall = pos[j].group == SlotGroup::recall;
      const uint64_t content =
          recall ? (1ull << 50) + (pos[j].stored_pos - 1234) : pos[j].stored_pos;
      fill(content * 2, &raw[j * kHd], kHd);
      keys.push_back(
          {&raw[j * kHd], &v[size_t{pos[j].slot} * kHd], static_cast<double>(pos[j].virtual_pos)});
    }
    oracle_attention(kHeads, kKv, kHd, rope, q.data(), static_cast<double>(view.query_pos), keys,
                     0.125f, want.data());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4) << "clock " << clock;
  }
  EXPECT_GT(ring.clock(), kTokens);
}

}  // namespace
}  // namespace channel
