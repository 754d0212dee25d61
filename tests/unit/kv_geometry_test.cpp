// SlotGeometry and the tiers of SlotRing: the wrap formula against a simulated write
// pointer over many geometries and wraps, tier ranges, anchors immutable, bad counts.
#include <gtest/gtest.h>

#include "kv/slot_geometry.h"
#include "kv/slot_ring.h"
#include "util/error.h"

namespace channel {
namespace {

TEST(KvGeometry, DefaultTiersMatchTheSpec) {
  SlotGeometry g(4096, 128, 700);
  EXPECT_EQ(g.window_begin(), 700u);
  EXPECT_EQ(g.window_end(), 3968u);
  EXPECT_EQ(g.recall_begin(), 3968u);
  EXPECT_EQ(g.recall_end(), 4096u);
  EXPECT_EQ(g.window_size(), 3968u - 700u);
  EXPECT_EQ(g.tier_of(0), Tier::anchor);
  EXPECT_EQ(g.tier_of(699), Tier::anchor);
  EXPECT_EQ(g.tier_of(700), Tier::window);
  EXPECT_EQ(g.tier_of(3967), Tier::window);
  EXPECT_EQ(g.tier_of(3968), Tier::recall);
  EXPECT_EQ(g.tier_of(4095), Tier::recall);
  EXPECT_EQ(g.slot_of(3967), 3967u);
  EXPECT_EQ(g.slot_of(3968), 700u);  // wraps back to N_sys, never into recall
  EXPECT_EQ(g.slot_of(699), 699u);
}

// The spec's write pointer, simulated step by step: starts at N_sys, advances by one and
// jumps back to N_sys when it reaches the recall tier.
TEST(KvGeometry, WrapFormulaEqualsSimulatedWritePointerEverywhere) {
  for (uint32_t n_slots = 1; n_slots <= 24; ++n_slots)
    for (uint32_t n_recall = 0; n_recall < n_slots; ++n_recall)
      for (uint32_t n_sys = 0; n_sys <= SlotGeometry::max_anchors(n_slots, n_recall); ++n_sys) {
        const SlotGeometry g(n_slots, n_recall, n_sys);
        uint32_t pointer = 0;
        const uint64_t clocks = n_sys + 7ull * g.window_size() + 3;  // seven wraps and a bit
        for (uint64_t clock = 0; clock < clocks; ++clock) {
          ASSERT_EQ(g.slot_of(clock), pointer) << "slots " << n_slots << " recall " << n_recall
                                               << " sys " << n_sys << " clock " << clock;
          if (clock >= n_sys) {
            ASSERT_EQ(g.tier_of(pointer), Tier::window);
            ASSERT_EQ(g.ring_index(clock), pointer - n_sys);
          } else {
            ASSERT_EQ(g.tier_of(pointer), Tier::anchor);
          }
          if (++pointer == g.window_end()) pointer = n_sys;
        }
      }
}

TEST(KvGeometry, PropertyAtLargeClocksAndManyAnchorCounts) {
  uint64_t state = 12345;
  const auto next = [&] { return state = state * 6364136223846793005ull + 1442695040888963407ull; };
  for (int trial = 0; trial < 20000; ++trial) {
    const uint32_t n_slots = 2 + next() % 5000;
    const uint32_t n_recall = next() % (n_slots - 1);
    const uint32_t n_sys = next() % (SlotGeometry::max_anchors(n_slots, n_recall) + 1);
    const SlotGeometry g(n_slots, n_recall, n_sys);
    const uint64_t clock = n_sys + (next() >> 20);  // up to ~2^44: many wraps
    const uint32_t s = g.slot_of(clock);
    ASSERT_GE(s, g.window_begin());
    ASSERT_LT(s, g.window_end());
    // Periodic with the window size, and consecutive clocks are consecutive ring slots.
    ASSERT_EQ(g.slot_of(clock + g.window_size()), s);
    const uint32_t s1 = g.slot_of(clock + 1);
    ASSERT_EQ(s1, s + 1 == g.window_end() ? g.window_begin() : s + 1);
    ASSERT_EQ(s, n_sys + (clock - n_sys) % (n_slots - n_recall - n_sys));
  }
}

TEST(KvGeometry, SlotCountsThatCannotHoldAWindowAreErrors) {
  EXPECT_THROW(SlotGeometry(0, 0, 0), Error);
  EXPECT_THROW(SlotGeometry(128, 128, 0), Error);
  EXPECT_THROW(SlotGeometry(128, 200, 0), Error);
  EXPECT_THROW(SlotGeometry(128, 120, 8), Error);  // anchors leave no window
  EXPECT_NO_THROW(SlotGeometry(128, 120, 7));
  EXPECT_THROW(SlotGeometry(128, 120, 6, 3), Error);  // a window of 3 is required
  EXPECT_THROW(SlotRing(RingConfig{64, 64, 0, 0}), Error);
  EXPECT_THROW(SlotRing(RingConfig{64, 8, 56, 0}), Error);  // probe reserve eats the window
  try {
    SlotGeometry(4096, 128, 4000);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("anchors of 4000 tokens are too long"), std::string::npos)
        << e.what();
  }
}

TEST(KvGeometry, AnchorsTooLongAtColdBootIsAnErrorWithStateUnchanged) {
  SlotRing ring(RingConfig{16, 4, 0, 0});
  ring.begin_span(SpanType::system);
  for (int i = 0; i < 11; ++i) ring.append_token();  // 16 - 4 - 1 = 11 anchors fit
  const uint64_t before = ring.state_checksum();
  EXPECT_THROW(ring.append_token(), Error);
  EXPECT_EQ(ring.state_checksum(), before);
  ring.seal();
  EXPECT_EQ(ring.geometry().n_sys(), 11u);
  EXPECT_EQ(ring.geometry().window_size(), 1u);
}

TEST(KvGeometry, AnchorsAreImmutableAndTheWritePointerStaysInTheWindow) {
  for (uint32_t n_sys : {0u, 1u, 5u, 30u}) {
    SlotRing ring(RingConfig{64, 8, 0, 0});
    ring.begin_span(SpanType::system);
    for (uint32_t i = 0; i < n_sys; ++i) EXPECT_EQ(ring.append_token(), i);
    for (uint32_t i = 0; i < n_sys; ++i) EXPECT_NO_THROW(ring.check_write(i));  // during boot
    ring.seal();
    for (uint32_t i = 0; i < n_sys; ++i) EXPECT_THROW(ring.check_write(i), Error);
    EXPECT_THROW(ring.check_write(64), Error);
    const SlotGeometry& g = ring.geometry();
    for (int t = 0; t < 1000; ++t) {
      if (t % 7 == 0) ring.begin_span(SpanType::user);
      const uint32_t slot = ring.append_token();
      ASSERT_EQ(g.tier_of(slot), Tier::window);
      ASSERT_EQ(slot, g.slot_of(ring.clock() - 1));
      ASSERT_NO_THROW(ring.check_write(slot));
      for (uint32_t i = 0; i < n_sys; ++i) ASSERT_EQ(ring.slot_clock(i), i);  // anchors intact
    }
    EXPECT_THROW(ring.seal(), Error);
  }
}

}  // namespace
}  // namespace channel
