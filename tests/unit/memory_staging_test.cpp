// Staging buffer triggers (A turn end / inactivity, B capacity with span alignment, C velocity,
// clock jumps), the consolidation math (salience, centroid, slab order), and the background
// worker: episodes land in the store with lineage, a full queue drops instead of blocking, and
// K/V are copied at push time so an aggressively reused ring cannot corrupt an episode.
#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>

#include "memory/consolidation.h"
#include "memory/staging.h"
#include "memory_test_util.h"

namespace channel {
namespace {

constexpr StagingDims kDims{2, 4, 32};

// A fake model: token t has hidden state (t, 1, 0, 0) (or a jump), and K/V rows whose values
// encode (clock, layer, K/V, index).
struct Feeder {
  std::vector<float> k_ring, v_ring;  // [slots][L][kv_dim]: a tiny ring, reused every 3 tokens
  std::vector<float> hidden = std::vector<float>(4);
  Feeder() : k_ring(3 * 2 * 32), v_ring(3 * 2 * 32) {}

  static float kv_value(uint64_t clock, size_t l, int kv, size_t i) {
    return static_cast<float>(clock * 1000 + l * 100 + kv * 50 + i % 50);
  }

  void push(StagingBuffer& s, uint64_t clock, StagedToken t = {}, float jump = 0.0f,
            uint64_t now = 0) {
    const uint32_t slot = static_cast<uint32_t>(clock % 3);
    const float* k[2];
    const float* v[2];
    for (size_t l = 0; l < 2; ++l) {
      float* kr = &k_ring[(slot * 2 + l) * 32];
      float* vr = &v_ring[(slot * 2 + l) * 32];
      for (size_t i = 0; i < 32; ++i) {
        kr[i] = kv_value(clock, l, 0, i);
        vr[i] = kv_value(clock, l, 1, i);
      }
      k[l] = kr;
      v[l] = vr;
    }
    hidden = {static_cast<float>(clock) + jump, 1.0f, 0.0f, 0.0f};
    t.token = static_cast<int32_t>(clock + 1000);
    t.clock = clock;
    t.slot = slot;
    t.hidden = hidden;
    s.push(t, k, v, now);
  }
};

struct Collected {
  std::vector<StagedEpisode> eps;
  StagingBuffer::Sink sink() {
    return [this](StagedEpisode&& e) { eps.push_back(std::move(e)); };
  }
};

TEST(MemoryStaging, CapacityCutsAtTheLastSpanBoundary) {
  Collected c;
  StagingConfig cfg;
  cfg.capacity = 8;
  StagingBuffer s(cfg, kDims, c.sink());
  Feeder f;
  for (uint64_t t = 0; t < 19; ++t) {
    StagedToken tok;
    tok.span_end = (t == 5 || t == 10);  // sentence ends
    f.push(s, t, tok);
  }
  // 0..5 (the boundary at 5 is in the second half of 8 tokens), then 6..10 (10 is index 4 of
  // 6..13, the start of its second half); 11..18 stay staged.
  ASSERT_EQ(c.eps.size(), 2u);
  EXPECT_EQ(c.eps[0].start_clock, 0u);
  EXPECT_EQ(c.eps[0].size(), 6u);
  EXPECT_EQ(c.eps[0].continuation_token, 1006);
  EXPECT_EQ(c.eps[0].reason, CutReason::capacity);
  EXPECT_EQ(c.eps[1].start_clock, 6u);
  EXPECT_EQ(c.eps[1].size(), 5u);  // 6..10
  EXPECT_EQ(s.size(), 8u);
  // Without a boundary the whole buffer goes.
  cfg.align_to_spans = false;
  Collected c2;
  StagingBuffer s2(cfg, kDims, c2.sink());
  for (uint64_t t = 0; t < 17; ++t) f.push(s2, t);
  ASSERT_EQ(c2.eps.size(), 2u);
  EXPECT_EQ(c2.eps[1].start_clock, 8u);
  EXPECT_EQ(c2.eps[1].size(), 8u);
  EXPECT_EQ(c2.eps[1].continuation_token, 1016);
}

TEST(MemoryStaging, TurnEndInactivityVelocityAndClockJumps) {
  Collected c;
  StagingConfig cfg;
  cfg.capacity = 64;
  cfg.velocity_threshold = 10.0f;
  cfg.inactivity_ms = 500;
  StagingBuffer s(cfg, kDims, c.sink());
  Feeder f;
  StagedToken turn;
  turn.turn_end = true;
  f.push(s, 0, {}, 0, 0);
  f.push(s, 1, {}, 0, 0);
  f.push(s, 2, turn, 0, 0);  // A: cut after the turn's last token
  ASSERT_EQ(c.eps.size(), 1u);
  EXPECT_EQ(c.eps[0].size(), 3u);
  EXPECT_EQ(c.eps[0].reason, CutReason::turn_end);
  f.push(s, 3, {}, 0, 1000);
  s.poll(1400);
  EXPECT_EQ(c.eps.size(), 1u);
  s.poll(1500);  // A: idle for 500 ms
  ASSERT_EQ(c.eps.size(), 2u);
  EXPECT_EQ(c.eps[1].reason, CutReason::inactivity);
  f.push(s, 4);
  f.push(s, 5);
  f.push(s, 6, {}, 50.0f);  // C: x jumps by ~50 > 10: cut before token 6
  ASSERT_EQ(c.eps.size(), 3u);
  EXPECT_EQ(c.eps[2].reason, CutReason::velocity);
  EXPECT_EQ(c.eps[2].size(), 2u);
  EXPECT_EQ(c.eps[2].continuation_token, 1006);
  f.push(s, 9);  // the clock jumped (a rollback or a new stream)
  ASSERT_EQ(c.eps.size(), 4u);
  EXPECT_EQ(c.eps[3].reason, CutReason::discontinuity);
  EXPECT_EQ(c.eps[3].start_clock, 6u);
  s.flush();
  ASSERT_EQ(c.eps.size(), 5u);
  EXPECT_EQ(c.eps[4].start_clock, 9u);
  // x_before chains episodes: the last state of the previous one.
  EXPECT_EQ(c.eps[4].x_before, c.eps[3].hidden);
  EXPECT_TRUE(c.eps[0].x_before.empty());
}

TEST(MemoryStaging, KvIsCopiedAtPushSoRingReuseCannotCorruptIt) {
  // The feeder's ring has 3 slots, reused every 3 tokens: by the time an episode of 8 is
  // cut, its first slots have been overwritten 2 times.
  Collected c;
  StagingConfig cfg;
  cfg.capacity = 8;
  cfg.align_to_spans = false;
  StagingBuffer s(cfg, kDims, c.sink());
  Feeder f;
  for (uint64_t t = 0; t < 24; ++t) f.push(s, t);
  ASSERT_EQ(c.eps.size(), 2u);
  for (const StagedEpisode& e : c.eps) {
    for (size_t t = 0; t < e.size(); ++t) {
      for (size_t l = 0; l < 2; ++l) {
        for (int kv = 0; kv < 2; ++kv) {
          for (size_t i = 0; i < 32; ++i) {
            ASSERT_EQ(e.kv[((t * 2 + l) * 2 + kv) * 32 + i],
                      Feeder::kv_value(e.start_clock + t, l, kv, i));
          }
        }
      }
      EXPECT_EQ(e.slots[t], (e.start_clock + t) % 3);
    }
  }
}

TEST(MemoryConsolidation, SalienceCentroidAndSlabOrder) {
  StagedEpisode e;
  e.tokens = {1, 2};
  e.hidden = {3, 0, 0, 0, 0, 4, 0, 0};
  EXPECT_FLOAT_EQ(salience_of(e, 4), 5.0f);  // first episode: x_last - x_first
  e.x_before = {0, 4, 0, 1};
  EXPECT_FLOAT_EQ(salience_of(e, 4), 1.0f);
  const auto c = centroid_of(e.hidden, 4);
  EXPECT_FLOAT_EQ(c[0], 0.6f);
  EXPECT_FLOAT_EQ(c[1], 0.8f);
  EXPECT_EQ(centroid_of(std::vector<float>(4, 0.0f), 4), std::vector<float>(4, 0.0f));
  // [n=2][L=3][2][d=2] -> [L][2][n][d]
  std::vector<float> staged(24), out(24);
  for (size_t i = 0; i < 24; ++i) staged[i] = static_cast<float>(i);
  staged_kv_to_slab_order(staged, 2, 3, 2, out);
  // layer 1, V, token 1, element 0: staged index ((1 * 3 + 1) * 2 + 1) * 2 = 18
  EXPECT_EQ(out[((1 * 2 + 1) * 2 + 1) * 2], 18.0f);
}

TEST(MemoryConsolidation, WorkerWritesEpisodesWithLineage) {
  test::ScratchDir dir;
  StoreGeometry g;
  g.num_layers = kDims.num_layers;
  g.hidden_size = kDims.hidden_size;
  g.kv_dim = kDims.kv_dim;
  g.max_episodes = 16;
  g.max_tokens = 8;
  StoreOptions o = test::not_durable();
  EpisodicStore store = EpisodicStore::create(dir.file("w.mem"), g, 7, o);
  std::vector<StagedEpisode> sent;
  {
    WorkerConfig wc;
    wc.queue_capacity = 64;
    wc.summarize = [](std::span<const int32_t> t) { return "starts with " + std::to_string(t[0]); };
    ConsolidationWorker worker(store, wc);
    StagingConfig cfg;
    cfg.capacity = 8;
    cfg.align_to_spans = false;
    StagingBuffer s(cfg, kDims, [&](StagedEpisode&& e) {
      sent.push_back(e);
      EXPECT_TRUE(worker.submit(std::move(e)));
    });
    Feeder f;
    for (uint64_t t = 0; t < 30; ++t) f.push(s, t);
    s.flush();
    worker.drain();
    const WorkerStats st = worker.stats();
    EXPECT_EQ(st.written, 4u);
    EXPECT_EQ(st.dropped, 0u);
    EXPECT_EQ(st.failed, 0u);
    EXPECT_EQ(st.last_episode_id, 3u);
  }
  ASSERT_EQ(store.live_count(), 4u);
  for (uint64_t id = 0; id < 4; ++id) {
    const Episode e = store.read(id);
    EXPECT_EQ(e.header.parent_episode_id, id ? id - 1 : kNoEpisode);
    EXPECT_EQ(e.header.child_count, id < 3 ? 1u : 0u);
    EXPECT_EQ(e.header.start_clock, sent[id].start_clock);
    EXPECT_EQ(e.tokens, sent[id].tokens);
    EXPECT_EQ(e.summary, "starts with " + std::to_string(sent[id].tokens[0]));
    EXPECT_NEAR(e.header.salience_norm, salience_of(sent[id], 4), 1e-4);
    const size_t n = e.tokens.size();
    for (size_t l = 0; l < 2; ++l) {
      for (size_t t = 0; t < n; ++t) {
        // Values are integers < 2048 here, exact in f16 up to 2048 and within 1 ulp beyond.
        const float want = Feeder::kv_value(e.header.start_clock + t, l, 1, 7);
        EXPECT_NEAR(e.kv[((l * 2 + 1) * n + t) * 32 + 7], want, want / 1000.0f);
      }
    }
  }
}

TEST(MemoryConsolidation, FullQueueDropsInsteadOfBlocking) {
  test::ScratchDir dir;
  StoreGeometry g;
  g.num_layers = 1;
  g.hidden_size = 4;
  g.kv_dim = 32;
  g.max_episodes = 64;
  g.max_tokens = 4;
  EpisodicStore store = EpisodicStore::create(dir.file("d.mem"), g, 7);  // durable: slow appends
  WorkerConfig wc;
  wc.queue_capacity = 2;
  wc.block_when_full = false;
  std::atomic<bool> gate{false};
  // The summarizer blocks the writer thread until the test opens the gate.
  wc.summarize = [&](std::span<const int32_t>) {
    while (!gate.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return std::string("x");
  };
  ConsolidationWorker worker(store, wc);
  auto make = [] {
    StagedEpisode e;
    e.tokens = {1};
    e.slots = {0};
    e.hidden = {1, 0, 0, 0};
    e.kv.assign(2 * 32, 0.5f);
    return e;
  };
  int accepted = 0;
  for (int i = 0; i < 10; ++i) accepted += worker.submit(make());  // returns at once
  // One in flight (maybe) + 2 queued; the rest dropped.
  EXPECT_GE(accepted, 2);
  EXPECT_LE(accepted, 3);
  gate = true;
  worker.drain();
  const WorkerStats st = worker.stats();
  EXPECT_EQ(st.submitted, 10u);
  EXPECT_EQ(st.dropped, static_cast<uint64_t>(10 - accepted));
  EXPECT_EQ(st.written, static_cast<uint64_t>(accepted));
}

TEST(MemoryConsolidation, AFullQueueWaitsForTheWriterAndLosesNothing) {
  test::ScratchDir dir;
  StoreGeometry g;
  g.num_layers = 1;
  g.hidden_size = 4;
  g.kv_dim = 32;
  g.max_episodes = 64;
  g.max_tokens = 4;
  EpisodicStore store = EpisodicStore::create(dir.file("w.mem"), g, 7);
  WorkerConfig wc;
  wc.queue_capacity = 2;  // block_when_full by default
  std::atomic<bool> gate{false};
  wc.summarize = [&](std::span<const int32_t>) {  // the writer waits for the gate
    while (!gate.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return std::string("x");
  };
  ConsolidationWorker worker(store, wc);
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    gate = true;
  });
  for (int i = 0; i < 10; ++i) {
    StagedEpisode e;
    e.tokens = {i + 1};
    e.slots = {0};
    e.hidden = {1, 0, 0, 0};
    e.kv.assign(2 * 32, 0.5f);
    EXPECT_TRUE(worker.submit(std::move(e)));
  }
  opener.join();
  worker.drain();
  const WorkerStats st = worker.stats();
  EXPECT_EQ(st.submitted, 10u);
  EXPECT_EQ(st.dropped, 0u);
  EXPECT_EQ(st.written, 10u);
  EXPECT_EQ(store.live_count(), 10u);
}

TEST(MemoryConsolidation, WriteFailureIsCountedNotFatal) {
  test::ScratchDir dir;
  StoreGeometry g;
  g.num_layers = 1;
  g.hidden_size = 4;
  g.kv_dim = 32;
  g.max_episodes = 4;
  g.max_tokens = 2;  // episodes of 3 tokens do not fit
  StoreOptions o = test::not_durable();
  EpisodicStore store = EpisodicStore::create(dir.file("f.mem"), g, 7, o);
  ConsolidationWorker worker(store, {});
  StagedEpisode e;
  e.tokens = {1, 2, 3};
  e.slots = {0, 1, 2};
  e.hidden.assign(12, 1.0f);
  e.kv.assign(3 * 2 * 32, 0.5f);
  worker.submit(std::move(e));
  worker.drain();
  EXPECT_EQ(worker.stats().failed, 1u);
  EXPECT_NE(worker.stats().last_error.find("3 tokens"), std::string::npos);
  EXPECT_EQ(store.total_episodes(), 0u);
}

}  // namespace
}  // namespace channel
