// Speculative greedy decoding: with n-gram and model drafters the output is token-identical
// to plain greedy decoding on llama, gemma3 and bounded models; Session::truncate_last rolls
// back exactly (and refuses what it cannot undo).
#include <functional>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/thread_pool.h"
#include "bounded/bounded_state.h"
#include "gguf/gguf_writer.h"
#include "model/model.h"
#include "model/random_model.h"
#include "runtime/session.h"
#include "runtime/speculative.h"
#include "support/micro_model.h"
#include "util/error.h"

namespace channel {
namespace {

RandomModelSpec tiny(Arch arch, uint64_t seed = 1) {
  RandomModelSpec s;
  s.arch = arch;
  s.hidden = 64;
  s.layers = 3;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 16;
  s.rope_dims = 8;
  s.ffn = 96;
  s.window = 6;
  s.window_pattern = 3;
  s.sinks = 2;
  s.global_every = 3;
  s.vocab = 300;
  s.seed = seed;
  return s;
}

struct Built {
  std::vector<uint8_t> bytes;
  std::shared_ptr<const Model> model;
};

Built build(const RandomModelSpec& spec) {
  ThreadPool pool(1);
  GgufWriter w;
  write_random_model(spec, w, pool);
  Built b{w.to_bytes(), nullptr};
  b.model = Model::load_from_memory(b.bytes, "spec.gguf");
  return b;
}

SessionConfig config() {
  SessionConfig c;
  c.n_ctx = 160;
  c.n_threads = 2;
  return c;
}

// A prompt that quotes itself, so prompt lookup has something to find.
std::vector<int32_t> repetitive_prompt() {
  std::vector<int32_t> p = {2};
  for (int rep = 0; rep < 3; ++rep) {
    for (int i = 0; i < 12; ++i) p.push_back(10 + (i * 7) % 50);
  }
  return p;
}

std::vector<int32_t> plain_greedy(const std::shared_ptr<const Model>& m, int n) {
  Session s(m, config());
  return generate_greedy_speculative(s, repetitive_prompt(), n, nullptr, 0);
}

class Speculative : public ::testing::TestWithParam<Arch> {};

TEST_P(Speculative, NgramDraftsGiveTheGreedyOutput) {
  const Built b = build(tiny(GetParam()));
  const std::vector<int32_t> want = plain_greedy(b.model, 80);
  ASSERT_EQ(want.size(), 80u);
  for (int draft_max : {1, 4, 8, UNDO_DEPTH}) {
    Session s(b.model, config());
    NgramDrafter ngram(3);
    SpeculativeStats stats;
    const std::vector<int32_t> got =
        generate_greedy_speculative(s, repetitive_prompt(), 80, &ngram, draft_max, {}, &stats);
    EXPECT_EQ(got, want) << "draft_max " << draft_max;
    EXPECT_GT(stats.drafted, 0);
    EXPECT_LE(stats.accepted, stats.drafted);
    // The session holds prompt + output, the last token decoded or not (it is when it was an
    // accepted draft).
    const int held = static_cast<int>(repetitive_prompt().size() + got.size());
    EXPECT_TRUE(s.n_past() == held || s.n_past() == held - 1) << s.n_past();
  }
}

TEST_P(Speculative, ModelDraftsGiveTheGreedyOutput) {
  const Built b = build(tiny(GetParam()));
  const Built d = build(tiny(GetParam(), 7));  // another model, same vocabulary
  const std::vector<int32_t> want = plain_greedy(b.model, 50);
  for (const Built* draft : {&b, &d}) {
    Session s(b.model, config());
    ModelDrafter drafter(draft->model, *b.model, config());
    SpeculativeStats stats;
    const std::vector<int32_t> got =
        generate_greedy_speculative(s, repetitive_prompt(), 50, &drafter, 5, {}, &stats);
    EXPECT_EQ(got, want);
    if (draft == &b) {
      EXPECT_GT(stats.acceptance(), 0.9);  // the target drafting for itself
    }
  }
}

TEST_P(Speculative, StopsAtAnEndToken) {
  const Built b = build(tiny(GetParam()));
  const std::vector<int32_t> want = plain_greedy(b.model, 40);
  const int32_t end = want[17];
  size_t first = 0;
  while (want[first] != end) ++first;
  Session s(b.model, config());
  NgramDrafter ngram;
  const std::vector<int32_t> got = generate_greedy_speculative(
      s, repetitive_prompt(), 40, &ngram, 6, [&](int32_t t) { return t == end; });
  EXPECT_EQ(got, std::vector<int32_t>(want.begin(), want.begin() + first));
}

INSTANTIATE_TEST_SUITE_P(Archs, Speculative,
                         ::testing::Values(Arch::llama, Arch::gemma3, Arch::bounded),
                         test::arch_test_name);

TEST(SessionTruncate, RestoresTheStateAndRefusesWhatItCannotUndo) {
  const Built b = build(tiny(Arch::bounded));
  Session s(b.model, config());
  std::vector<int32_t> toks;
  for (int i = 0; i < 50; ++i) toks.push_back(3 + i);
  s.decode(toks);
  const std::vector<int32_t> probe = {40, 41, 42};
  Session ref(b.model, config());
  ref.decode(toks);
  const std::span<const float> w = ref.decode_all(probe);
  const std::vector<float> want(w.begin(), w.end());
  for (int k : {1, 5, UNDO_DEPTH}) {
    std::vector<int32_t> junk(static_cast<size_t>(k), 99);
    s.decode(junk);
    s.truncate_last(k);
    EXPECT_EQ(s.n_past(), 50);
  }
  const std::span<const float> got = s.decode_all(probe);
  EXPECT_EQ(std::vector<float>(got.begin(), got.end()), want);  // bit-identical: same chunks, restored rings
  s.truncate_last(3);
  EXPECT_THROW(s.truncate_last(51), Error);
  EXPECT_THROW(s.truncate_last(-1), Error);
  std::vector<int32_t> more(40, 7);
  s.decode(more);
  EXPECT_THROW(s.truncate_last(UNDO_DEPTH + 1), Error);  // beyond the bounded undo history
  EXPECT_EQ(s.n_past(), 90);
  Session t(b.model, config());
  NgramDrafter ngram;
  EXPECT_THROW(generate_greedy_speculative(t, toks, 5, &ngram, UNDO_DEPTH + 1), Error);
}

TEST(NgramDrafter, ProposesWhatFollowedTheLatestMatch) {
  NgramDrafter d(2);
  const std::vector<int32_t> h = {1, 2, 3, 4, 9, 2, 3, 5, 6, 2, 3};
  EXPECT_EQ(d.draft(h, 3), (std::vector<int32_t>{5, 6, 2}));  // "2 3" last seen before "5 6"
  EXPECT_EQ(d.draft(h, 1), (std::vector<int32_t>{5}));
  const std::vector<int32_t> none = {1, 2, 3};
  EXPECT_TRUE(d.draft(none, 4).empty());
}

}  // namespace
}  // namespace channel
