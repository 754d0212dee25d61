// SlotRing: span-aligned eviction with the hook, the cut rule, recall slots, probes with
// rollback, integer-only sliding, and a randomized comparison with the oracle timeline.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "support/kv_oracle.h"
#include "kv/slot_ring.h"
#include "kv/virtual_positions.h"
#include "util/error.h"

namespace channel {

void PrintTo(const SemanticSpan& s, std::ostream* os) {
  *os << span_type_name(s.span_type) << "[" << s.start_clock << "," << s.end_clock << ")@"
      << s.start_slot << "x" << s.slot_count;
}

namespace {

SlotRing booted(const RingConfig& config, uint32_t n_anchors) {
  SlotRing ring(config);
  ring.begin_span(SpanType::system);
  for (uint32_t i = 0; i < n_anchors; ++i) ring.append_token();
  ring.seal();
  return ring;
}

void append_span(SlotRing& ring, SpanType type, uint32_t n) {
  ring.begin_span(type);
  for (uint32_t i = 0; i < n; ++i) ring.append_token();
}

TEST(KvRing, EvictsTheOldestWholeSpansAndCallsTheHookBeforeReuse) {
  SlotRing ring = booted({32, 4, 0, 0}, 4);  // window of 24 slots: [4, 28)
  std::vector<EvictionEvent> events;
  std::vector<std::vector<uint32_t>> event_slots;
  ring.set_eviction_hook([&](const EvictionEvent& ev) {
    // Before reuse: every slot still holds the evicted clock.
    for (size_t i = 0; i < ev.slots.size(); ++i)
      EXPECT_EQ(ring.slot_clock(ev.slots[i]), ev.span.start_clock + i);
    events.push_back(ev);
    event_slots.emplace_back(ev.slots.begin(), ev.slots.end());
  });
  append_span(ring, SpanType::user, 10);              // clocks 4..13
  append_span(ring, SpanType::thought, 8);            // 14..21
  append_span(ring, SpanType::response_sentence, 6);  // 22..27: the window is full
  EXPECT_TRUE(events.empty());
  EXPECT_EQ(ring.window_live(), 24u);
  append_span(ring, SpanType::turn_end, 1);  // evicts the whole user span
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].span, (SemanticSpan{SpanType::user, 4, 14, 4, 10}));
  EXPECT_FALSE(events[0].cut);
  EXPECT_EQ(event_slots[0], (std::vector<uint32_t>{4, 5, 6, 7, 8, 9, 10, 11, 12, 13}));
  EXPECT_EQ(ring.oldest(), 14u);
  EXPECT_EQ(ring.window_live(), 15u);
  EXPECT_EQ(ring.window_span_count(), 3u);
  // The turn_end token reused slot 4, now holding clock 28.
  EXPECT_EQ(ring.slot_clock(4), 28u);
  for (uint32_t s = 5; s < 14; ++s) EXPECT_FALSE(ring.slot_live(s));
  EXPECT_EQ(ring.evicted_spans(), 1u);
}

TEST(KvRing, ASpanLongerThanTheWindowIsCutInChunksFromItsFront) {
  SlotRing ring = booted({32, 4, 0, 5}, 2);  // window 26, cut chunk 5
  std::vector<EvictionEvent> events;
  ring.set_eviction_hook([&](const EvictionEvent& ev) { events.push_back(ev); });
  append_span(ring, SpanType::tool_result, 26);  // clocks 2..27 fill the window
  EXPECT_TRUE(events.empty());
  ring.append_token();  // clock 28 continues the span: cut 5 from its front
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(events[0].cut);
  EXPECT_EQ(events[0].span, (SemanticSpan{SpanType::tool_result, 2, 7, 2, 5}));
  EXPECT_EQ(ring.window_live(), 22u);
  EXPECT_EQ(ring.window_span(0), (SemanticSpan{SpanType::tool_result, 7, 29, 7, 22}));
  for (int i = 0; i < 4; ++i) ring.append_token();  // fills again without a cut
  EXPECT_EQ(events.size(), 1u);
  ring.append_token();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].span, (SemanticSpan{SpanType::tool_result, 7, 12, 7, 5}));
  // Once full again, a new span evicts the remainder whole, not in chunks.
  for (int i = 0; i < 4; ++i) ring.append_token();
  append_span(ring, SpanType::response_sentence, 1);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_FALSE(events[2].cut);
  EXPECT_EQ(events[2].span.start_clock, 12u);
  EXPECT_EQ(events[2].span.slot_count, 26u);
  EXPECT_EQ(ring.window_live(), 1u);
}

TEST(KvRing, DefaultCutChunkIsAnEighthOfTheWindow) {
  EXPECT_EQ(booted({4096, 128, 0, 0}, 100).cut_chunk(), (4096u - 128 - 100) / 8);
  EXPECT_EQ(booted({16, 4, 0, 0}, 5).cut_chunk(), 1u);
  EXPECT_EQ(booted({16, 4, 0, 100}, 5).cut_chunk(), 7u);  // clamped to the capacity
}

TEST(KvRing, CutChunkEqualToTheWindowContinuesTheSpanTypeInANewSpan) {
  SlotRing ring = booted({16, 2, 0, 14}, 0);  // window 14, chunk 14
  std::vector<EvictionEvent> events;
  ring.set_eviction_hook([&](const EvictionEvent& ev) { events.push_back(ev); });
  append_span(ring, SpanType::thought, 15);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(events[0].cut);
  EXPECT_EQ(events[0].span.slot_count, 14u);
  ASSERT_EQ(ring.window_span_count(), 1u);
  EXPECT_EQ(ring.window_span(0), (SemanticSpan{SpanType::thought, 14, 15, 0, 1}));
}

TEST(KvRing, SlidingEvictingAndActivatingMoveNoKvBytes) {
  const RingConfig config{48, 8, 0, 0};
  SlotRing ring = booted(config, 3);
  const uint32_t head_dim = 5, n_kv = 2;
  std::vector<float> arena(size_t{n_kv} * config.n_slots * head_dim);  // [n_kv][n_slots][hd]
  for (size_t i = 0; i < arena.size(); ++i) arena[i] = static_cast<float>(i % 97) * 0.25f;
  const auto fnv = [&] {
    uint64_t h = 1469598103934665603ull;
    const auto* b = reinterpret_cast<const unsigned char*>(arena.data());
    for (size_t i = 0; i < arena.size() * sizeof(float); ++i) h = (h ^ b[i]) * 1099511628211ull;
    return h;
  };
  const uint64_t before = fnv();
  std::vector<uint32_t> table;
  for (int t = 0; t < 500; ++t) {
    if (t % 5 == 0) ring.begin_span(static_cast<SpanType>(1 + t % 6));
    ring.append_token();  // the caller would write K/V here; we deliberately do not
    if (t % 37 == 0) ring.activate_recall(t, 3, t);
    if (t % 37 == 20) ring.deactivate_recall(t - 20);
    if (t % 61 == 0 && ring.window_span_count() > 1) ring.evict_oldest_span();
    ring.active_slots(table);
  }
  EXPECT_EQ(fnv(), before);
}

TEST(KvRing, RecallSlotsFirstFitAndErrors) {
  SlotRing ring = booted({64, 8, 0, 0}, 5);
  EXPECT_EQ(ring.activate_recall(1, 3, 1000), 56u);
  EXPECT_EQ(ring.activate_recall(2, 4, 2000), 59u);
  EXPECT_THROW(ring.activate_recall(3, 2, 0), Error);  // 1 free slot
  EXPECT_THROW(ring.activate_recall(2, 1, 0), Error);  // already active
  EXPECT_THROW(ring.activate_recall(4, 0, 0), Error);
  EXPECT_EQ(ring.slot_clock(57), 1001u);
  ring.deactivate_recall(1);
  EXPECT_FALSE(ring.slot_live(56));
  EXPECT_THROW(ring.deactivate_recall(1), Error);
  EXPECT_EQ(ring.activate_recall(5, 2, 7), 56u);  // first fit reuses the gap
  EXPECT_EQ(ring.recall_used(), 6u);
  ASSERT_EQ(ring.recall_episodes().size(), 2u);
  EXPECT_EQ(ring.recall_episodes()[0].id, 2u);  // activation order
  EXPECT_EQ(ring.recall_episodes()[1].id, 5u);
  EXPECT_NO_THROW(ring.check_write(56));
  SlotRing unsealed(RingConfig{64, 8, 0, 0});
  EXPECT_THROW(unsealed.activate_recall(1, 1, 0), Error);
}

TEST(KvRing, ProbeAndRollbackRestoreTheStateBitForBit) {
  for (uint32_t reserve : {0u, 6u}) {
    SlotRing ring = booted({40, 4, reserve, 0}, 4);
    for (int t = 0; t < 90; ++t) {
      if (t % 9 == 0) ring.begin_span(SpanType::user);
      ring.append_token();
    }
    ring.activate_recall(9, 2, 11);
    ring.begin_span(SpanType::thought);  // a pending span survives the probe too
    const SlotRing before = ring;
    int hook_calls = 0;
    ring.set_eviction_hook([&](const EvictionEvent&) { ++hook_calls; });
    const uint32_t free = ring.free_window();
    ASSERT_GT(free, 0u);
    const ProbeMark mark = ring.begin_probe();
    ring.append_token();  // continues the pending thought span
    ring.begin_span(SpanType::response_sentence);
    for (uint32_t i = 1; i < free; ++i) ring.append_token();
    EXPECT_EQ(ring.free_window(), 0u);
    EXPECT_THROW(ring.append_token(), Error);  // longer than the free window
    EXPECT_THROW(ring.evict_oldest_span(), Error);
    EXPECT_THROW(ring.activate_recall(10, 1, 0), Error);
    ring.rollback_clock(mark);
    EXPECT_EQ(hook_calls, 0);
    EXPECT_EQ(state_diff(ring, before), "");
    EXPECT_EQ(ring.state_checksum(), before.state_checksum());
    EXPECT_THROW(ring.rollback_clock(mark), Error);  // no probe running
  }
}

TEST(KvRing, ChecksumAndDiffSeeEveryChange) {
  SlotRing a = booted({40, 4, 0, 0}, 4);
  append_span(a, SpanType::user, 3);
  SlotRing b = a;
  EXPECT_EQ(state_diff(a, b), "");
  b.append_token();
  EXPECT_NE(state_diff(a, b), "");
  EXPECT_NE(a.state_checksum(), b.state_checksum());
  SlotRing c = a;
  c.begin_span(SpanType::user);
  EXPECT_NE(state_diff(a, c), "");
}

TEST(KvRing, ErrorsForMisuse) {
  SlotRing ring(RingConfig{32, 4, 0, 0});
  EXPECT_THROW(ring.append_token(), Error);  // no span
  EXPECT_THROW(ring.geometry(), Error);
  EXPECT_THROW(ring.begin_probe(), Error);
  ring.begin_span(SpanType::system);
  ring.append_token();
  ring.seal();
  EXPECT_THROW(ring.append_token(), Error);       // window tokens need their own span
  EXPECT_THROW(ring.evict_oldest_span(), Error);  // empty window
  EXPECT_THROW(ring.begin_span(static_cast<SpanType>(9)), Error);
}

TEST(KvRing, FlatActiveTableIsAnchorsRecallWindow) {
  SlotRing ring = booted({20, 4, 0, 0}, 2);  // window [2, 16)
  append_span(ring, SpanType::user, 20);     // wraps: live clocks after cuts
  ring.activate_recall(1, 2, 100);
  std::vector<uint32_t> table;
  ring.active_slots(table);
  std::vector<uint32_t> expect = {0, 1, 16, 17};
  for (uint64_t c = ring.oldest(); c < ring.clock(); ++c)
    expect.push_back(ring.geometry().slot_of(c));
  EXPECT_EQ(table, expect);
}

// Random streams through SlotRing and OracleTimeline in lockstep: the same evictions, the
// same live table, and each query's visible keys with the same stored and virtual positions.
TEST(KvRing, MatchesTheOracleTimelineOnRandomStreams) {
  uint64_t state = 99;
  const auto next = [&] {
    return (state = state * 6364136223846793005ull + 1442695040888963407ull) >> 33;
  };
  const RingConfig configs[] = {{64, 8, 0, 0}, {64, 8, 4, 0}, {40, 0, 0, 3}, {24, 6, 2, 1}};
  for (const RingConfig& config : configs) {
    SlotRing ring(config);
    OracleTimeline oracle(config);
    std::vector<SemanticSpan> ring_events;
    int cuts = 0, probes = 0, recalls = 0;
    ring.set_eviction_hook([&](const EvictionEvent& ev) {
      ring_events.push_back(ev.span);
      cuts += ev.cut;
    });
    const uint32_t n_anchors = 1 + next() % 5;
    ring.begin_span(SpanType::system);
    oracle.begin_span(SpanType::system);
    for (uint32_t i = 0; i < n_anchors; ++i) {
      ring.append_token();
      oracle.append_token();
    }
    ring.seal();
    oracle.seal();
    uint64_t next_episode = 1;
    std::optional<ProbeMark> mark;
    for (int step = 0; step < 3000; ++step) {
      uint32_t op = next() % 100;
      if ((step / 400) % 2 == 1 && op > 0 && op < 12) op = 99;  // phases of long spans: cuts
      if (op < 12) {
        const auto type = static_cast<SpanType>(1 + next() % 6);
        ring.begin_span(type);
        oracle.begin_span(type);
      } else if (op < 14 && !mark && ring.window_span_count() > 1) {
        ring.evict_oldest_span();
        oracle.evict_oldest_span();
      } else if (op < 16 && !mark) {
        const uint32_t n = 1 + next() % 4;
        const uint64_t stored = next() % 5000;
        try {
          ring.activate_recall(next_episode, n, stored);
          oracle.activate_recall(next_episode, n, stored);
          ++recalls;
        } catch (const Error&) {
        }
        ++next_episode;
      } else if (op < 18 && !mark && !ring.recall_episodes().empty()) {
        const uint64_t id = ring.recall_episodes()[next() % ring.recall_episodes().size()].id;
        ring.deactivate_recall(id);
        oracle.deactivate_recall(id);
      } else if (op < 20 && !mark && ring.free_window() > 0 && ring.clock() > n_anchors) {
        mark = ring.begin_probe();
        oracle.begin_probe();
        ++probes;
      } else if (op < 24 && mark) {
        ring.rollback_clock(*mark);
        oracle.rollback();
        mark.reset();
      } else if (!mark || ring.free_window() > 0) {
        if (ring.window_live() == 0 && ring.window_span_count() == 0 && op % 2) {
          ring.begin_span(SpanType::user);
          oracle.begin_span(SpanType::user);
        }
        try {
          ring.append_token();
        } catch (const Error&) {  // no span begun yet right after seal
          ring.begin_span(SpanType::user);
          oracle.begin_span(SpanType::user);
          ring.append_token();
        }
        oracle.append_token();
      }
      ASSERT_EQ(ring.clock(), oracle.clock());
      ASSERT_EQ(ring_events.size(), oracle.evictions().size()) << "step " << step;
      if (!ring_events.empty()) {
        ASSERT_EQ(ring_events.back(), oracle.evictions().back()) << "step " << step;
      }
      if (ring.window_live() == 0) continue;
      const uint64_t q = ring.oldest() + next() % ring.window_live();
      QueryView view;
      const std::vector<SlotPosition> got = global_positions(ring, q, &view);
      const OracleView want = oracle.global_view(q);
      ASSERT_EQ(view.query_pos, want.query_pos) << "step " << step;
      ASSERT_EQ(got.size(), want.keys.size()) << "step " << step;
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i].group, want.keys[i].group);
        ASSERT_EQ(got[i].stored_pos, want.keys[i].stored_pos) << "step " << step << " key " << i;
        ASSERT_EQ(got[i].virtual_pos, want.keys[i].position) << "step " << step << " key " << i;
        ASSERT_EQ(got[i].virtual_pos, static_cast<int64_t>(i));  // contiguous from 0
      }
      ASSERT_LE(view.max_distance, config.n_slots - 1u);
    }
    EXPECT_GT(cuts, 0);  // the stream exercised every path
    EXPECT_GT(probes, 10);
    if (config.n_recall > 0) {
      EXPECT_GT(recalls, 10);
    }
    EXPECT_GT(ring_events.size(), 100u);
  }
}

}  // namespace
}  // namespace channel
