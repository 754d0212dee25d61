// RingSession on micro models (llama, gemma3 with sliding layers, and bounded with two
// swa_sink_v1 layers and one global layer): logits equal the
// oracle engine's at every step over thousands of tokens and many wraps (64 slots, 8 recall,
// anchors of 5), equal the plain contiguous session before the first wrap, and probes leave
// clock, table, spans, every non-transient K/V byte and the next logits bit-identical.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "gguf/gguf_writer.h"
#include "support/kv_oracle.h"
#include "model/model.h"
#include "model/random_model.h"
#include "runtime/ring_session.h"
#include "runtime/session.h"
#include "util/error.h"
#include "support/micro_model.h"

namespace channel {
namespace {

using Built = test::BuiltModel;

Built micro(Arch arch) {
  return test::build_model(test::micro_model_spec(arch, 5));
}

RingSessionConfig small_geometry() {
  RingSessionConfig c;
  c.ring = RingConfig{64, 8, 4, 0};
  c.n_threads = 1;
  c.n_batch = 16;
  return c;
}

// The oracle engine: forward() with an attention that keeps every token's unrotated K/V and
// attends over the explicit views of an OracleTimeline, in double precision. Bounded layers
// run their own operator on states of its own, snapshotted around probes.
class OracleEngine final : public PerHeadAttention {
 public:
  OracleEngine(std::shared_ptr<const Model> model, const RingConfig& ring)
      : PerHeadAttention(model->hparams()),
        model_(std::move(model)),
        timeline_(ring),
        pool_(1),
        scratch_(model_->hparams(), 1),
        bounded_(*model_),
        layers_(layer_attention(model_->hparams(), bounded_, *this)),
        logits_(model_->hparams().n_vocab) {
    const ModelHparams& hp = model_->hparams();
    const RopeStyle layout = hp.rope_style;
    rope_global_ = RopeFreqs::make(layout, hp.n_rot, hp.rope_base, hp.rope_freq_scale);
    rope_sliding_ = RopeFreqs::make(layout, hp.n_rot, hp.rope_base_swa, 1.0);
    k_.resize(hp.n_layer);
    v_.resize(hp.n_layer);
  }
  void begin_span(SpanType t) { timeline_.begin_span(t); }
  void seal() { timeline_.seal(); }
  void begin_probe() {
    timeline_.begin_probe();
    saved_.clear();
    for (int il = 0; il < model_->hparams().n_layer; ++il)
      saved_.push_back(bounded_.state(il).snapshot());
  }
  void rollback() {
    timeline_.rollback();
    for (int il = 0; il < model_->hparams().n_layer; ++il)
      if (model_->hparams().is_bounded(il)) bounded_.state(il).restore(saved_[il]);
  }

  const std::vector<float>& step(int32_t token) {
    const ModelHparams& hp = model_->hparams();
    clock_ = timeline_.clock();
    timeline_.append_token();
    global_ = timeline_.global_view(clock_);
    local_ = timeline_.local_view(clock_, static_cast<uint32_t>(hp.sliding_window));
    forward(*model_, ForwardBatch{{&token, 1}, layers_}, LogitsFor::last, scratch_, pool_,
            logits_.data());
    return logits_;
  }

 protected:
  void store(int il, int, const float* k, const float* v) override {
    const size_t row = size_t(model_->hparams().n_head_kv) * model_->hparams().head_dim;
    k_[il].resize((clock_ + 1) * row);  // forgets rolled-back tokens
    v_[il].resize((clock_ + 1) * row);
    std::memcpy(&k_[il][clock_ * row], k, row * sizeof(float));
    std::memcpy(&v_[il][clock_ * row], v, row * sizeof(float));
  }

  void attend_head(int il, int, int hk, const float* q, float* out, int) override {
    const ModelHparams& hp = model_->hparams();
    const bool sliding = hp.is_sliding(il);
    const OracleView& view = sliding ? local_ : global_;
    const size_t row = size_t(hp.n_head_kv) * hp.head_dim;
    std::vector<OracleKv> keys;
    for (const OracleKey& key : view.keys)
      keys.push_back({&k_[il][key.stored_pos * row + hk * hp.head_dim],
                      &v_[il][key.stored_pos * row + hk * hp.head_dim],
                      static_cast<double>(key.position)});
    oracle_attention(hp.n_head / hp.n_head_kv, 1, hp.head_dim,
                     sliding ? rope_sliding_ : rope_global_, q, static_cast<double>(view.query_pos),
                     keys, hp.attn_scale, out);
  }

 private:
  std::shared_ptr<const Model> model_;
  OracleTimeline timeline_;
  ThreadPool pool_;
  ForwardScratch scratch_;
  BoundedAttention bounded_;  // bounded layers' states
  std::vector<LayerAttention*> layers_;
  std::vector<BoundedSnapshot> saved_;
  RopeFreqs rope_global_, rope_sliding_;
  std::vector<std::vector<float>> k_, v_;  // [n_layer][clock][n_head_kv][head_dim] unrotated
  uint64_t clock_ = 0;
  OracleView global_, local_;
  std::vector<float> logits_;
};

void expect_close(std::span<const float> got, std::span<const float> want, const char* what,
                  uint64_t clock) {
  float scale = 0;
  for (float x : want) scale = std::max(scale, std::fabs(x));
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-4f * (1 + scale)) << what << " at clock " << clock;
}

class KvSession : public ::testing::TestWithParam<Arch> {};

TEST_P(KvSession, LogitsEqualTheOracleAtEveryStepOverManyWraps) {
  const Built b = micro(GetParam());
  const RingSessionConfig config = small_geometry();
  RingSession ring(b.model, config);
  OracleEngine oracle(b.model, config.ring);
  uint64_t rng = 17, evictions = 0, probes = 0;
  const auto next = [&] {
    return (rng = rng * 6364136223846793005ull + 1442695040888963407ull) >> 33;
  };
  ring.set_eviction_hook([&](const EvictionEvent&) { ++evictions; });
  const auto token = [&] { return static_cast<int32_t>(next() % 300); };
  oracle.begin_span(SpanType::system);
  for (int i = 0; i < 5; ++i) {
    const int32_t tok = token();
    const std::span<const float> got =
        i == 0 ? ring.append(SpanType::system, {&tok, 1}) : ring.decode({&tok, 1});
    expect_close(got, oracle.step(tok), "anchor", i);
  }
  ring.seal();
  oracle.seal();
  for (int step = 0; step < 2500; ++step) {
    const int32_t tok = token();
    const uint32_t op = next() % 100;
    std::span<const float> got;
    if (op < 12 || step == 0) {  // a new span of 1..20 tokens in one call (chunked)
      const auto type = static_cast<SpanType>(1 + next() % 6);
      std::vector<int32_t> toks{tok};
      for (uint32_t n = next() % 20; n > 0; --n) toks.push_back(token());
      oracle.begin_span(type);
      for (size_t i = 0; i + 1 < toks.size(); ++i) oracle.step(toks[i]);
      expect_close(ring.append(type, toks), oracle.step(toks.back()), "span", ring.ring().clock());
      continue;
    } else if (op < 15 && ring.max_probe() >= 2) {
      const int32_t probe[2] = {tok, token()};
      const std::vector<float> p = ring.probe(probe, SpanType::thought);
      oracle.begin_probe();
      oracle.begin_span(SpanType::thought);
      oracle.step(probe[0]);
      expect_close(p, oracle.step(probe[1]), "probe", ring.ring().clock());
      oracle.rollback();
      ++probes;
      continue;
    } else {
      got = ring.decode({&tok, 1});
    }
    expect_close(got, oracle.step(tok), "token", ring.ring().clock());
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(ring.ring().clock(), 30u * 64);  // many wraps
  EXPECT_GT(evictions, 100u);
  EXPECT_GT(probes, 30u);
  EXPECT_LE(ring.max_distance(), 63u);
}

// Before the first eviction virtual positions are the clocks: the ring session must agree
// with the plain contiguous Session (float RoPE angles there, f64 here: small differences).
TEST_P(KvSession, EqualsThePlainSessionBeforeTheFirstWrap) {
  const Built b = micro(GetParam());
  RingSession ring(b.model, small_geometry());  // window 51, capacity 47: no eviction below
  Session plain(b.model, SessionConfig{64, 1, 16});
  std::vector<int32_t> tokens;
  for (int i = 0; i < 50; ++i) tokens.push_back((i * 37 + 11) % 300);
  const std::span<const int32_t> all(tokens);
  expect_close(ring.append(SpanType::system, all.first(5)), plain.decode(all.first(5)), "anchors",
               5);
  ring.seal();
  std::vector<float> last;
  for (size_t i = 5; i < tokens.size(); ++i) {
    const std::span<const float> got =
        i == 5 ? ring.append(SpanType::user, all.subspan(i, 1)) : ring.decode(all.subspan(i, 1));
    expect_close(got, plain.decode(all.subspan(i, 1)), "token", i);
    last.assign(got.begin(), got.end());
  }
  EXPECT_EQ(ring.ring().evicted_spans(), 0u);
  // A chunked prefill (n_batch 16) gives the same last logits as token-by-token decoding.
  RingSession chunked(b.model, small_geometry());
  chunked.append(SpanType::system, all.first(5));
  chunked.seal();
  expect_close(chunked.append(SpanType::user, all.subspan(5)), last, "chunked", tokens.size());
}

// Two sessions fed the same tokens, one of them also running probes: after every probe the
// ring state, every K/V byte outside the probe's transient slots and the next logits are
// bit-identical.
TEST_P(KvSession, ProbesLeaveStateKvAndNextLogitsBitIdentical) {
  const Built b = micro(GetParam());
  const RingSessionConfig config = small_geometry();
  RingSession with(b.model, config), without(b.model, config);
  const ModelHparams& hp = b.model->hparams();
  const int32_t anchors[5] = {1, 2, 3, 4, 5};
  with.append(SpanType::system, anchors);
  without.append(SpanType::system, anchors);
  with.seal();
  without.seal();
  int probes = 0;
  for (int step = 0; step < 400; ++step) {
    const int32_t tok = (step * 53 + 7) % 300;
    const bool new_span = step % 9 == 0 || step % 9 == 4;
    const SpanType type = step % 9 == 0 ? SpanType::user : SpanType::response_sentence;
    std::vector<float> a, c;
    const auto feed = [&](RingSession& s, std::vector<float>& out) {
      const std::span<const float> l = new_span ? s.append(type, {&tok, 1}) : s.decode({&tok, 1});
      out.assign(l.begin(), l.end());
    };
    feed(with, a);
    feed(without, c);
    ASSERT_EQ(std::memcmp(a.data(), c.data(), a.size() * sizeof(float)), 0) << "step " << step;
    if (step % 7 != 3 || with.max_probe() == 0) continue;
    const uint64_t clock = with.ring().clock();
    const uint32_t k = std::min<uint32_t>(with.max_probe(), 1 + step % 4);
    std::vector<int32_t> probe(k);
    for (uint32_t i = 0; i < k; ++i) probe[i] = static_cast<int32_t>((step + 31 * i) % 300);
    with.probe(probe);
    ++probes;
    ASSERT_EQ(state_diff(with.ring(), without.ring()), "");
    const size_t hd = hp.head_dim;
    for (int il = 0; il < hp.n_layer; ++il) {
      if (hp.is_bounded(il)) {  // ring, counter and undo history, bit for bit
        ASSERT_TRUE(with.bounded_state(il).bit_equal(without.bounded_state(il))) << "layer " << il;
        ASSERT_TRUE(with.layer_k(il).empty());
        continue;
      }
      const size_t n_slots = with.layer_k(il).size() / (hp.n_head_kv * hd);
      const auto transient = [&](size_t slot) {
        for (uint64_t c2 = clock; c2 < clock + k; ++c2) {
          const size_t s = hp.is_sliding(il) ? c2 % n_slots : with.ring().geometry().slot_of(c2);
          if (s == slot) return true;
        }
        return false;
      };
      for (size_t h = 0; h < size_t(hp.n_head_kv); ++h)
        for (size_t slot = 0; slot < n_slots; ++slot) {
          if (transient(slot)) continue;
          const size_t at = (h * n_slots + slot) * hd;
          ASSERT_EQ(std::memcmp(&with.layer_k(il)[at], &without.layer_k(il)[at], hd * 4), 0)
              << "layer " << il << " slot " << slot;
          ASSERT_EQ(std::memcmp(&with.layer_v(il)[at], &without.layer_v(il)[at], hd * 4), 0)
              << "layer " << il << " slot " << slot;
        }
    }
  }
  EXPECT_GT(probes, 30);
  EXPECT_GT(with.ring().evicted_spans(), 10u);
}

// What the eviction hook and the token tap saw, in order.
struct Events {
  std::vector<uint64_t> evicted;  // per event: type, start, end, cut, then its slots
  std::vector<int32_t> tokens;
  std::vector<uint64_t> clocks;
  std::vector<uint32_t> slots;
  std::vector<float> hidden;
  void watch(RingSession& s) {
    s.set_eviction_hook([this](const EvictionEvent& e) {
      evicted.insert(evicted.end(), {uint64_t(e.span.span_type), e.span.start_clock,
                                     e.span.end_clock, uint64_t(e.cut)});
      evicted.insert(evicted.end(), e.slots.begin(), e.slots.end());
    });
    s.set_token_tap([this](const TokenBatch& b) {
      tokens.insert(tokens.end(), b.tokens.begin(), b.tokens.end());
      clocks.insert(clocks.end(), b.clocks.begin(), b.clocks.end());
      slots.insert(slots.end(), b.slots.begin(), b.slots.end());
      hidden.insert(hidden.end(), b.hidden.begin(), b.hidden.end());
    });
  }
};

// feed() runs chunks of n_batch tokens across span starts and evictions (the window is full
// from the first few calls on; spans longer than the window are cut): logits after every
// call, the tap's hidden states, the hook's events, the ring state and every K/V byte equal
// those of the same tokens appended one by one, bit for bit.
TEST_P(KvSession, FeedAcrossSpansEqualsTokenByTokenBitForBit) {
  const Built b = micro(GetParam());
  const ModelHparams& hp = b.model->hparams();
  for (const uint32_t reserve : {0u, 4u}) {
    RingSessionConfig config = small_geometry();
    config.ring.probe_reserve = reserve;
    RingSession fed(b.model, config), ref(b.model, config);
    Events fed_events, ref_events;
    fed_events.watch(fed);
    ref_events.watch(ref);
    const int32_t anchors[5] = {1, 2, 3, 4, 5};
    fed.append(SpanType::system, anchors);
    ref.append(SpanType::system, anchors);
    fed.seal();
    ref.seal();
    uint64_t rng = 29 + reserve;
    const auto next = [&] {
      return (rng = rng * 6364136223846793005ull + 1442695040888963407ull) >> 33;
    };
    for (int call = 0; call < 120; ++call) {
      const auto type = static_cast<SpanType>(1 + next() % 6);
      const size_t n = 1 + next() % 50;
      std::vector<int32_t> tokens(n);
      std::vector<uint8_t> starts(n);
      for (size_t i = 0; i < n; ++i) {
        tokens[i] = static_cast<int32_t>(next() % 300);
        // Spans of about 12 tokens, some calls continuing the previous span, a few long runs.
        starts[i] = (i == 0 && (call == 0 || next() % 3 == 0)) || (i > 0 && next() % 12 == 0);
      }
      if (call % 10 == 9) std::fill(starts.begin() + 1, starts.end(), 0);
      const std::span<const float> got = fed.feed(type, tokens, starts);
      std::span<const float> want;
      for (size_t i = 0; i < n; ++i)
        want = starts[i] ? ref.append(type, {&tokens[i], 1}) : ref.decode({&tokens[i], 1});
      ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size_bytes()), 0) << "call " << call;
    }
    EXPECT_GT(ref.ring().evicted_spans(), 100u);
    EXPECT_EQ(state_diff(fed.ring(), ref.ring()), "");
    EXPECT_EQ(fed_events.evicted, ref_events.evicted);
    EXPECT_EQ(fed_events.tokens, ref_events.tokens);
    EXPECT_EQ(fed_events.clocks, ref_events.clocks);
    EXPECT_EQ(fed_events.slots, ref_events.slots);
    ASSERT_EQ(fed_events.hidden.size(), ref_events.hidden.size());
    EXPECT_EQ(std::memcmp(fed_events.hidden.data(), ref_events.hidden.data(),
                          fed_events.hidden.size() * sizeof(float)),
              0);
    for (int il = 0; il < hp.n_layer; ++il) {
      if (hp.is_bounded(il)) {
        EXPECT_TRUE(fed.bounded_state(il).bit_equal(ref.bounded_state(il))) << "layer " << il;
        continue;
      }
      ASSERT_EQ(fed.layer_k(il).size(), ref.layer_k(il).size());
      EXPECT_EQ(std::memcmp(fed.layer_k(il).data(), ref.layer_k(il).data(),
                            fed.layer_k(il).size_bytes()),
                0)
          << "layer " << il;
      EXPECT_EQ(std::memcmp(fed.layer_v(il).data(), ref.layer_v(il).data(),
                            fed.layer_v(il).size_bytes()),
                0)
          << "layer " << il;
    }
    // A mark list of the wrong length and a bad span type change nothing.
    const uint64_t before = fed.ring().state_checksum();
    const int32_t two[2] = {1, 2};
    const uint8_t one_mark[1] = {1};
    EXPECT_THROW(fed.feed(SpanType::user, two, one_mark), Error);
    const uint8_t marks[2] = {1, 0};
    EXPECT_THROW(fed.feed(static_cast<SpanType>(99), two, marks), Error);
    EXPECT_EQ(fed.ring().state_checksum(), before);
  }
}

TEST_P(KvSession, BadInputIsAClearErrorWithTheStateUnchanged) {
  const Built b = micro(GetParam());
  RingSessionConfig config = small_geometry();
  RingSession s(b.model, config);
  const uint64_t before = s.ring().state_checksum();
  std::vector<int32_t> too_many(60, 1);  // 64 - 8 recall - 1 - 4 reserve = 51 anchors at most
  EXPECT_THROW(s.append(SpanType::system, too_many), Error);
  const int32_t bad[2] = {1, 300};
  EXPECT_THROW(s.append(SpanType::system, bad), Error);
  EXPECT_THROW(s.append(SpanType::system, {}), Error);
  EXPECT_EQ(s.ring().state_checksum(), before);
  const int32_t ok[3] = {1, 2, 3};
  s.append(SpanType::system, ok);
  EXPECT_THROW(s.probe(ok), Error);  // not sealed
  s.seal();
  s.append(SpanType::user, ok);
  const uint64_t sealed = s.ring().state_checksum();
  std::vector<int32_t> long_probe(s.max_probe() + 1, 7);
  EXPECT_THROW(s.probe(long_probe), Error);
  EXPECT_EQ(s.ring().state_checksum(), sealed);
  config.ring = RingConfig{64, 64, 0, 0};
  EXPECT_THROW(RingSession(b.model, config), Error);
  if (b.model->hparams().sliding_window > 0) {
    config.ring = RingConfig{8, 0, 2, 0};  // cannot hold the sliding window of 8 + 2
    EXPECT_THROW(RingSession(b.model, config), Error);
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, KvSession,
                         ::testing::Values(Arch::llama, Arch::gemma3, Arch::bounded),
                         test::arch_test_name);

}  // namespace
}  // namespace channel
