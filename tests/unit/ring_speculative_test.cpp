// Speculative greedy decoding on RingSession: with n-gram and model drafters (draft_max 1..16)
// the output is token-identical to plain greedy decoding on llama, gemma3 and bounded micro
// models in a tiny geometry that wraps and evicts many times, the eviction hook receives the
// same events, the token tap the same tokens, and the ring ends in the same state. decode_all +
// truncate_last restores the ring exactly and refuses what it cannot undo.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/thread_pool.h"
#include "gguf/gguf_writer.h"
#include "kv/slot_ring.h"
#include "model/model.h"
#include "model/random_model.h"
#include "runtime/ring_session.h"
#include "runtime/speculative.h"
#include "util/error.h"
#include "support/micro_model.h"

namespace channel {
namespace {

using Built = test::BuiltModel;

Built micro(Arch arch, uint64_t seed = 5) {
  return test::build_model(test::micro_model_spec(arch, seed));
}

// 48 slots, 4 recall, 5 anchors: a window of 39 slots, 17 of them kept free, so 22 live
// tokens and cuts of 2 once the response fills the window. Verifies of up to 17 tokens.
RingSessionConfig tiny_geometry() {
  RingSessionConfig c;
  c.ring = RingConfig{48, 4, 17, 0};
  c.n_threads = 2;
  c.n_batch = 8;  // a verify of up to 17 tokens runs in up to 3 chunks
  return c;
}

const int32_t kAnchors[5] = {2, 40, 41, 42, 43};

std::vector<int32_t> repetitive_prompt() {
  std::vector<int32_t> p;
  for (int rep = 0; rep < 3; ++rep)
    for (int i = 0; i < 12; ++i) p.push_back(10 + (i * 7) % 50);
  return p;
}

int32_t argmax(std::span<const float> l) {
  return static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
}

struct Event {
  SpanType type;
  uint64_t start, end;
  std::vector<uint32_t> slots;
  bool cut;
  double kv = 0;  // sum of the evicted slots' keys and values on the global layer 2
  bool operator==(const Event& o) const {  // kv: batch sizes may round f32 matmuls apart
    return type == o.type && start == o.start && end == o.end && slots == o.slots && cut == o.cut &&
           std::fabs(kv - o.kv) <= 1e-4 * (1 + std::fabs(o.kv));
  }
};

// One token as the token tap saw it (episodic memory stages these).
struct Tapped {
  int32_t token;
  uint64_t clock;
  uint32_t slot;
  double hidden;  // sum of its final hidden state
  bool operator==(const Tapped&) const = default;
};

struct Outcome {
  std::vector<int32_t> out;
  std::vector<Event> events;
  std::vector<Tapped> tapped;  // non-transient tokens, in tap order
  SpeculativeStats stats;
  std::unique_ptr<RingSession> ring;
};

RingSession& start(Outcome& r, const Built& b) {
  r.ring = std::make_unique<RingSession>(b.model, tiny_geometry());
  r.ring->set_eviction_hook([&r](const EvictionEvent& e) {
    // The hook must see the evicted tokens' K/V intact: a draft token written over one of
    // them would change this sum completely.
    const RingSession& s = *r.ring;
    const size_t hd = s.model().hparams().head_dim, n_kv = s.model().hparams().n_head_kv;
    const size_t n_slots = s.layer_k(2).size() / (n_kv * hd);
    double kv = 0;
    for (uint32_t slot : e.slots)
      for (size_t h = 0; h < n_kv; ++h)
        for (size_t i = 0; i < hd; ++i)
          kv += s.layer_k(2)[(h * n_slots + slot) * hd + i] +
                s.layer_v(2)[(h * n_slots + slot) * hd + i];
    r.events.push_back({e.span.span_type, e.span.start_clock, e.span.end_clock,
                        std::vector<uint32_t>(e.slots.begin(), e.slots.end()), e.cut, kv});
  });
  r.ring->set_token_tap([&r](const TokenBatch& b) {
    if (b.transient) return;
    const size_t E = b.hidden.size() / b.tokens.size();
    for (size_t i = 0; i < b.tokens.size(); ++i) {
      double h = 0;
      for (size_t j = 0; j < E; ++j) h += b.hidden[i * E + j];
      r.tapped.push_back({b.tokens[i], b.clocks[i], b.slots[i], h});
    }
  });
  r.ring->append(SpanType::system, kAnchors);
  r.ring->seal();
  return *r.ring;
}

// Plain greedy: one decode() per token; ends holding prompt + output.
Outcome plain(const Built& b, int n) {
  Outcome r;
  RingSession& s = start(r, b);
  std::span<const float> logits = s.append(SpanType::user, repetitive_prompt());
  for (int i = 0; i < n; ++i) {
    const int32_t t = argmax(logits);
    r.out.push_back(t);
    logits = s.decode({&t, 1});
  }
  return r;
}

Outcome speculative(const Built& b, int n, Drafter* drafter, int draft_max) {
  Outcome r;
  RingSession& s = start(r, b);
  s.begin_span(SpanType::user);
  r.out =
      generate_greedy_speculative(s, repetitive_prompt(), n, drafter, draft_max, {}, &r.stats);
  // Hold the last output token too (it is decoded only when it was an accepted draft).
  const uint64_t held = 5 + repetitive_prompt().size() + r.out.size();
  if (s.ring().clock() + 1 == held) s.decode({&r.out.back(), 1});
  EXPECT_EQ(s.ring().clock(), held);
  return r;
}

void expect_same(const Outcome& got, const Outcome& want, const std::string& what) {
  EXPECT_EQ(got.out, want.out) << what;
  EXPECT_TRUE(got.events == want.events)
      << what << ": " << got.events.size() << " vs " << want.events.size() << " events";
  EXPECT_TRUE(got.tapped == want.tapped)
      << what << ": " << got.tapped.size() << " vs " << want.tapped.size() << " tapped tokens";
  EXPECT_EQ(state_diff(got.ring->ring(), want.ring->ring()), "") << what;
  EXPECT_EQ(got.ring->max_distance(), want.ring->max_distance()) << what;
}

class RingSpeculative : public ::testing::TestWithParam<Arch> {};

constexpr int kTokens = 120;

TEST_P(RingSpeculative, NgramDraftsGiveTheGreedyOutputAndTheSameEvictions) {
  const Built b = micro(GetParam());
  const Outcome want = plain(b, kTokens);
  ASSERT_GT(want.events.size(), 30u);  // wraps and evicts many times
  for (int draft_max : {1, 2, 3, 4, 7, 8, 11, 16}) {
    NgramDrafter ngram(3);
    const Outcome got = speculative(b, kTokens, &ngram, draft_max);
    expect_same(got, want, "ngram draft_max " + std::to_string(draft_max));
    EXPECT_GT(got.stats.drafted, 0);
    EXPECT_LE(got.stats.accepted, got.stats.drafted);
  }
  const Outcome none = speculative(b, kTokens, nullptr, 0);  // one token per verify
  expect_same(none, want, "no drafter");
}

TEST_P(RingSpeculative, ModelDraftsGiveTheGreedyOutputAndTheSameEvictions) {
  const Built b = micro(GetParam());
  const Built other = micro(GetParam(), 9);  // another model, same vocabulary
  const Outcome want = plain(b, kTokens);
  for (const Built* d : {&b, &other}) {
    for (int draft_max : {1, 5, 16}) {
      // A draft context of 64 tokens: the history (36 + 120) outgrows it, drafting goes on.
      ModelDrafter drafter(d->model, *b.model, SessionConfig{64, 1, 64});
      const Outcome got = speculative(b, kTokens, &drafter, draft_max);
      expect_same(got, want, "model draft_max " + std::to_string(draft_max));
      EXPECT_GE(got.stats.drafted, std::min(draft_max, 2) * got.stats.verify_steps / 2);
      // (The drafter keeps the whole history while the ring has evicted some of it, so even
      // the target drafting for itself is often rejected here.)
      EXPECT_LE(got.stats.accepted, got.stats.drafted);
    }
  }
}

TEST_P(RingSpeculative, DraftMaxNeedsTheProbeReserve) {
  const Built b = micro(GetParam());
  Outcome r;
  RingSession& s = start(r, b);
  s.begin_span(SpanType::user);
  NgramDrafter ngram;
  EXPECT_THROW(generate_greedy_speculative(s, repetitive_prompt(), 5, &ngram, 17), Error);
}

// decode_all + truncate_last(k) leaves the ring as decoding only the kept tokens would, and
// the next logits agree.
TEST_P(RingSpeculative, TruncateLastRestoresTheRing) {
  const Built b = micro(GetParam());
  Outcome a, c;
  RingSession& s = start(a, b);
  RingSession& ref = start(c, b);
  s.append(SpanType::user, repetitive_prompt());
  ref.append(SpanType::user, repetitive_prompt());
  int32_t tok = 3;
  for (int step = 0; step < 40; ++step) {
    const int n = 1 + step % 17;
    const int k = (step * 5) % n;  // drop 0 .. n - 1
    std::vector<int32_t> toks;
    for (int i = 0; i < n; ++i) toks.push_back(tok = (tok * 31 + 7) % 300);
    const std::span<const float> all = s.decode_all(toks);
    ASSERT_EQ(all.size(), size_t(n) * 300);
    s.truncate_last(k);
    ref.decode(std::span<const int32_t>(toks).first(n - k));
    ASSERT_EQ(state_diff(s.ring(), ref.ring()), "") << "step " << step;
    ASSERT_TRUE(a.events == c.events) << "step " << step;
    ASSERT_TRUE(a.tapped == c.tapped) << "step " << step;
    EXPECT_EQ(s.max_distance(), ref.max_distance());
    const ModelHparams& hp = b.model->hparams();
    for (int il = 0; il < hp.n_layer; ++il)
      if (hp.is_bounded(il)) {
        ASSERT_TRUE(s.bounded_state(il).same_ring(ref.bounded_state(il))) << "layer " << il;
      }
    // The next token's logits, bit for bit.
    const int32_t probe = 11;
    const std::span<const float> x = s.decode_all({&probe, 1});
    const std::vector<float> got(x.begin(), x.end());
    s.truncate_last(0);  // keep it, as ref does
    const std::span<const float> y = ref.decode({&probe, 1});
    ASSERT_EQ(std::memcmp(got.data(), y.data(), got.size() * sizeof(float)), 0) << "step " << step;
  }
  EXPECT_GT(a.events.size(), 20u);
  // Errors, with the state unchanged.
  const uint64_t before = s.ring().state_checksum();
  EXPECT_THROW(s.truncate_last(1), Error);  // nothing tentative
  const int32_t two[2] = {5, 6};
  s.decode_all(two);
  EXPECT_THROW(s.truncate_last(3), Error);
  EXPECT_THROW(s.truncate_last(-1), Error);
  s.truncate_last(2);
  EXPECT_EQ(s.ring().state_checksum(), before);
  std::vector<int32_t> long_call(18, 4);  // longer than max_truncate(): not tentative
  s.decode_all(long_call);
  EXPECT_THROW(s.truncate_last(1), Error);
}

INSTANTIATE_TEST_SUITE_P(Archs, RingSpeculative,
                         ::testing::Values(Arch::llama, Arch::gemma3, Arch::bounded),
                         test::arch_test_name);

}  // namespace
}  // namespace channel
