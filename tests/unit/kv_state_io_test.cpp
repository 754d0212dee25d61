// SlotRing state bytes: round trips are exact (and the restored ring continues identically),
// and truncated or corrupted bytes give a clear error or a consistent ring, never a crash.
#include <gtest/gtest.h>

#include <vector>

#include "kv/ring_state_io.h"
#include "kv/slot_ring.h"
#include "kv/virtual_positions.h"
#include "util/error.h"

namespace channel {
namespace {

// A ring in a busy state: anchors, wrapped window with cuts, recall episodes, a pending span.
SlotRing busy(const RingConfig& config, int tokens) {
  SlotRing ring(config);
  ring.begin_span(SpanType::system);
  for (int i = 0; i < 3; ++i) ring.append_token();
  ring.begin_span(SpanType::tool_call);
  ring.append_token();
  ring.seal();
  for (int t = 0; t < tokens; ++t) {
    if (t % 11 == 0 || t % 11 == 3) ring.begin_span(static_cast<SpanType>(1 + t % 6));
    ring.append_token();
    if (t == 40) ring.activate_recall(7, 3, 900);
    if (t == 50) ring.activate_recall(8, 2, 100);
  }
  ring.begin_span(SpanType::turn_end);
  return ring;
}

void continue_stream(SlotRing& ring) {
  for (int t = 0; t < 100; ++t) {
    if (t % 5 == 0) ring.begin_span(SpanType::user);
    ring.append_token();
  }
}

TEST(KvStateIo, RoundTripsExactlyAndContinuesIdentically) {
  const RingConfig config{48, 8, 2, 3};
  for (int tokens : {0, 5, 60, 333}) {
    SlotRing ring = busy(config, tokens);
    const std::vector<uint8_t> bytes = save_ring_state(ring);
    SlotRing back = load_ring_state(bytes, "test");
    ASSERT_EQ(state_diff(ring, back), "") << tokens;
    EXPECT_EQ(back.state_checksum(), ring.state_checksum());
    EXPECT_EQ(save_ring_state(back), bytes);
    continue_stream(ring);
    continue_stream(back);
    EXPECT_EQ(state_diff(ring, back), "");
  }
  SlotRing booting(config);  // unsealed: anchors only
  booting.begin_span(SpanType::system);
  booting.append_token();
  SlotRing back = load_ring_state(save_ring_state(booting), "test");
  EXPECT_EQ(state_diff(booting, back), "");
  back.append_token();
  back.seal();
}

TEST(KvStateIo, RefusesToSaveDuringAProbe) {
  SlotRing ring = busy({48, 8, 2, 3}, 20);
  ring.begin_probe();
  EXPECT_THROW(save_ring_state(ring), Error);
}

TEST(KvStateIo, EveryTruncationIsAnError) {
  const std::vector<uint8_t> bytes = save_ring_state(busy({48, 8, 2, 3}, 100));
  for (size_t n = 0; n < bytes.size(); ++n) {
    try {
      load_ring_state(std::span(bytes).first(n), "cut.chs");
      ADD_FAILURE() << "no error at length " << n;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("cut.chs: kv state:"), std::string::npos) << e.what();
    }
  }
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  EXPECT_THROW(load_ring_state(longer, "long"), Error);
  const RingConfig other{64, 8, 2, 3};
  EXPECT_THROW(load_ring_state(bytes, "other", &other), Error);  // mismatched geometry
}

// Every single-byte corruption either fails cleanly or yields a ring that still satisfies
// the invariants the kernels rely on (checked by using it).
TEST(KvStateIo, CorruptBytesFailCleanlyOrStayConsistent) {
  const RingConfig config{48, 8, 2, 3};
  const std::vector<uint8_t> bytes = save_ring_state(busy(config, 100));
  int errors = 0, accepted = 0;
  std::vector<SlotRun> runs;
  for (size_t i = 0; i < bytes.size(); ++i)
    for (uint8_t flip : {uint8_t{1}, uint8_t{0x80}, uint8_t{0xFF}}) {
      std::vector<uint8_t> bad = bytes;
      bad[i] ^= flip;
      try {
        SlotRing ring = load_ring_state(bad, "bad", &config);
        ++accepted;
        if (ring.sealed() && ring.window_live() > 0) {
          const QueryView v = global_runs(ring, ring.clock() - 1, runs);
          EXPECT_LT(v.max_distance, ring.config().n_slots);
          for (const SlotRun& r : runs)
            for (uint32_t j = 0; j < r.count; ++j) EXPECT_LT(r.slots[j], ring.config().n_slots);
        }
        if (ring.sealed()) continue_stream(ring);
      } catch (const Error&) {
        ++errors;
      }
    }
  EXPECT_GT(errors, 0);
  EXPECT_GT(accepted, 0);  // e.g. an episode id or the evicted-span count
}

}  // namespace
}  // namespace channel
