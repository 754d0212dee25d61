// One attention layer through the ring (SlotRing + slot_attention over a K/V arena written
// once per token, keys rotated at their stored position) against the oracle (every token
// kept unrotated, explicit visibility and positions, double precision), at every step of a
// stream with many wraps, span evictions, recalls and probes. A sliding-window layer
// (LocalRing) is checked against the oracle's local view the same way.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include "support/kv_oracle.h"
#include "kv/slot_attention.h"
#include "kv/slot_ring.h"
#include "kv/virtual_positions.h"
#include "util/error.h"

namespace channel {
namespace {

// Deterministic token contents: the oracle regenerates them instead of storing a copy.
void fill(uint64_t key, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint64_t z = key * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull + 0x94D049BB133111EBull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    out[i] = static_cast<float>(static_cast<double>(z >> 11) / 9007199254740992.0 * 2.0 - 1.0);
  }
}

constexpr uint64_t kKeyTag = 1, kValueTag = 2, kQueryTag = 3, kRecallTag = 1ull << 40;

struct Layer {
  static constexpr uint32_t kHeads = 4, kKvHeads = 2, kHeadDim = 12;
  SlotAttnShape shape;
  std::vector<float> k, v;  // [kKvHeads][n_slots][kHeadDim]
  explicit Layer(uint32_t n_slots) : shape{kHeads, kKvHeads, kHeadDim, n_slots} {
    k.assign(size_t{kKvHeads} * n_slots * kHeadDim, NAN);  // NaN: reading an unwritten slot shows
    v = k;
  }
  // Writes a token's K (rotated at stored_pos) and V into `slot`.
  void write(uint32_t slot, uint64_t content, double stored_pos, const RopeFreqs& rope) {
    float raw[kKvHeads * kHeadDim], rot[kKvHeads * kHeadDim], val[kKvHeads * kHeadDim];
    fill(content * 4 + kKeyTag, raw, std::size(raw));
    fill(content * 4 + kValueTag, val, std::size(val));
    rope_rotate_at(rope, stored_pos, raw, rot, kKvHeads, kHeadDim);
    for (uint32_t g = 0; g < kKvHeads; ++g) {
      std::memcpy(&k[(size_t{g} * shape.n_slots + slot) * kHeadDim], rot + g * kHeadDim,
                  kHeadDim * sizeof(float));
      std::memcpy(&v[(size_t{g} * shape.n_slots + slot) * kHeadDim], val + g * kHeadDim,
                  kHeadDim * sizeof(float));
    }
  }
};

// The oracle's attention for a view: K/V regenerated from each key's identity.
std::vector<float> oracle_out(const OracleView& view, const float* q, const RopeFreqs& rope,
                              float scale) {
  const size_t row = Layer::kKvHeads * Layer::kHeadDim;
  std::vector<float> kbuf(view.keys.size() * row), vbuf(view.keys.size() * row);
  std::vector<OracleKv> keys;
  for (size_t j = 0; j < view.keys.size(); ++j) {
    const OracleKey& key = view.keys[j];
    const uint64_t content = key.group == SlotGroup::recall
                                 ? kRecallTag + key.episode * 1000 + (key.stored_pos % 1000)
                                 : key.stored_pos;
    fill(content * 4 + kKeyTag, &kbuf[j * row], row);
    fill(content * 4 + kValueTag, &vbuf[j * row], row);
    keys.push_back({&kbuf[j * row], &vbuf[j * row], static_cast<double>(key.position)});
  }
  std::vector<float> out(Layer::kHeads * Layer::kHeadDim);
  oracle_attention(Layer::kHeads, Layer::kKvHeads, Layer::kHeadDim, rope, q,
                   static_cast<double>(view.query_pos), keys, scale, out.data());
  return out;
}

TEST(KvOracle, RingAttentionEqualsTheOracleAtEveryStepOverManyWraps) {
  const RingConfig config{64, 8, 4, 0};  // 64 slots, 8 recall, probe reserve 4
  const uint32_t kAnchors = 5, kLocalWindow = 12, kSteps = 4000;
  const RopeFreqs rope = RopeFreqs::make(RopeStyle::neox, Layer::kHeadDim, 10000.0);
  const float scale = 1.0f / std::sqrt(float{Layer::kHeadDim});
  SlotRing ring(config);
  OracleTimeline oracle(config);
  LocalRing local(kLocalWindow, config.probe_reserve);
  Layer global_layer(config.n_slots), local_layer(local.n_slots());
  SlotAttnScratch scratch;
  std::vector<SlotRun> runs;
  float q[Layer::kHeads * Layer::kHeadDim];
  std::vector<float> got(std::size(q));
  uint64_t rng = 7;
  const auto next = [&] {
    return (rng = rng * 6364136223846793005ull + 1442695040888963407ull) >> 33;
  };
  uint64_t evictions = 0, probes = 0, recalls = 0;
  ring.set_eviction_hook([&](const EvictionEvent&) { ++evictions; });
  double worst = 0;

  const auto append = [&](bool check) {
    const uint64_t clock = ring.clock();
    const uint32_t slot = ring.append_token();
    oracle.append_token();
    ring.check_write(slot);
    global_layer.write(slot, clock, static_cast<double>(clock), rope);
    local_layer.write(local.slot_of(clock), clock, static_cast<double>(clock), rope);
    if (!check) return;
    fill(clock * 4 + kQueryTag, q, std::size(q));
    // Global layer: the ring's runs against the oracle's explicit view.
    const QueryView view = global_runs(ring, clock, runs);
    ASSERT_LE(view.max_distance, config.n_slots - 1u);
    slot_attention(global_layer.shape, rope, q, global_layer.k.data(), global_layer.v.data(), runs,
                   scale, got.data(), scratch);
    const std::vector<float> want = oracle_out(oracle.global_view(clock), q, rope, scale);
    for (size_t i = 0; i < got.size(); ++i) {
      worst = std::max(worst, double{std::fabs(got[i] - want[i])});
      ASSERT_NEAR(got[i], want[i], 1e-4) << "global, clock " << clock << " i " << i;
    }
    // Sliding layer: the last W tokens at their true distances.
    const SlotRun lrun = local.run(clock);
    slot_attention(local_layer.shape, rope, q, local_layer.k.data(), local_layer.v.data(),
                   {&lrun, 1}, scale, got.data(), scratch);
    const std::vector<float> lwant =
        oracle_out(oracle.local_view(clock, kLocalWindow), q, rope, scale);
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], lwant[i], 1e-4) << "local, clock " << clock << " i " << i;
  };

  ring.begin_span(SpanType::system);
  oracle.begin_span(SpanType::system);
  for (uint32_t i = 0; i < kAnchors; ++i) append(true);
  ring.seal();
  oracle.seal();
  uint64_t episode = 1;
  for (uint32_t step = 0; step < kSteps; ++step) {
    const uint32_t op = next() % 100;
    if (op < 10 || ring.window_live() == 0) {
      const auto type = static_cast<SpanType>(1 + next() % 6);
      ring.begin_span(type);
      oracle.begin_span(type);
    }
    if (op >= 10 && op < 12) {  // recall an episode: K rotated at its own stored positions
      const uint32_t n = 1 + next() % 3;
      const uint64_t stored = 100000 + next() % 900;
      if (ring.recall_used() + n <= config.n_recall) {
        try {
          const uint32_t first = ring.activate_recall(episode, n, stored);
          oracle.activate_recall(episode, n, stored);
          for (uint32_t i = 0; i < n; ++i)
            global_layer.write(first + i, kRecallTag + episode * 1000 + (stored + i) % 1000,
                               static_cast<double>(stored + i), rope);
          ++recalls;
        } catch (const Error&) {  // fragmented: no run of n free slots
        }
        ++episode;
      }
    } else if (op >= 12 && op < 14 && !ring.recall_episodes().empty()) {
      const uint64_t id = ring.recall_episodes()[0].id;
      ring.deactivate_recall(id);
      oracle.deactivate_recall(id);
    } else if (op >= 14 && op < 17 && ring.free_window() >= 1) {
      // A probe: transient tokens, then rollback. Non-transient K/V bytes stay identical.
      const std::vector<float> gk = global_layer.k, gv = global_layer.v;
      const std::vector<float> lk = local_layer.k, lv = local_layer.v;
      const SlotRing before = ring;
      const uint64_t saved_clock = ring.clock();
      const ProbeMark mark = ring.begin_probe();
      oracle.begin_probe();
      const uint32_t n = 1 + next() % std::min<uint32_t>(ring.free_window(), config.probe_reserve);
      ring.begin_span(SpanType::thought);
      oracle.begin_span(SpanType::thought);
      for (uint32_t i = 0; i < n; ++i) append(true);
      ring.rollback_clock(mark);
      oracle.rollback();
      ASSERT_EQ(state_diff(ring, before), "");
      const auto same_except = [](const std::vector<float>& a, const std::vector<float>& b,
                                  uint32_t n_slots, auto transient) {
        for (size_t i = 0; i < a.size(); ++i) {
          const auto slot = static_cast<uint32_t>((i / Layer::kHeadDim) % n_slots);
          if (!transient(slot) && std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return false;
        }
        return true;
      };
      const auto g_transient = [&](uint32_t slot) {
        for (uint64_t c = saved_clock; c < saved_clock + n; ++c)
          if (ring.geometry().slot_of(c) == slot) return true;
        return false;
      };
      const auto l_transient = [&](uint32_t slot) {
        for (uint64_t c = saved_clock; c < saved_clock + n; ++c)
          if (local.slot_of(c) == slot) return true;
        return false;
      };
      ASSERT_TRUE(same_except(gk, global_layer.k, config.n_slots, g_transient));
      ASSERT_TRUE(same_except(gv, global_layer.v, config.n_slots, g_transient));
      ASSERT_TRUE(same_except(lk, local_layer.k, local.n_slots(), l_transient));
      ASSERT_TRUE(same_except(lv, local_layer.v, local.n_slots(), l_transient));
      ++probes;
      continue;
    }
    append(true);
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(ring.clock(), 40u * config.n_slots);  // many wraps
  EXPECT_GT(evictions, 300u);
  EXPECT_GT(probes, 50u);
  EXPECT_GT(recalls, 50u);
  RecordProperty("max_abs_error", std::to_string(worst));
}

}  // namespace
}  // namespace channel
