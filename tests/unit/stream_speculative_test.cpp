// Speculative greedy generation on a StreamSession (runtime/stream_speculative.h): with
// n-gram and model drafters the tokens, their text and span starts, and the whole session
// (session_to_bytes: ring, spans, K/V, sampler history, span state) equal plain greedy
// generate_stream's, on llama, gemma3 and bounded micro models in a geometry that evicts and
// cuts many times; a callback that stops mid-verify leaves the state plain generation leaves;
// bad settings are one-line errors before any work.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/generate_stream.h"
#include "runtime/session_file.h"
#include "runtime/speculative.h"
#include "runtime/stream_session.h"
#include "runtime/stream_speculative.h"
#include "support/micro_model.h"
#include "util/error.h"

namespace channel {
namespace {

// 64 slots, 4 recall, a probe reserve of 9: verifies of up to 9 tokens, a window of ~50.
RingSessionConfig geometry() {
  RingSessionConfig c = test::micro_ring_config(RingConfig{64, 4, 9, 0});
  c.n_batch = 4;  // a verify runs in up to 3 chunks
  return c;
}

SamplerConfig greedy() {
  SamplerConfig s;
  s.temperature = 0.0f;
  return s;
}

std::vector<int32_t> prompt() {  // repeats, so that prompt lookup drafts are often right
  std::vector<int32_t> p;
  for (int rep = 0; rep < 4; ++rep)
    for (int i = 0; i < 9; ++i) p.push_back(static_cast<int32_t>(60 + (i * 11) % 40));
  p.push_back(46);  // '.' (byte 0x2E): a sentence end in the prompt
  return p;
}

std::unique_ptr<StreamSession> started(const std::shared_ptr<const Model>& model) {
  auto s = std::make_unique<StreamSession>(model, geometry(), greedy());
  const int32_t anchors[] = {2, 40, 41};
  s->append(SpanType::system, anchors);
  s->seal();
  s->feed(SpanType::user, prompt());
  return s;
}

struct Out {
  std::vector<int32_t> tokens;
  std::string text;
  int new_spans = 0;
  StreamGenerateResult result;
};

StreamGenerateCallbacks collect(Out& out, int stop_after = -1) {
  StreamGenerateCallbacks cb;
  cb.on_token = [&out, stop_after](const GeneratedToken& g) {
    out.tokens.push_back(g.token);
    out.text += g.text;
    out.new_spans += g.new_span ? 1 : 0;
    return stop_after < 0 || static_cast<int>(out.tokens.size()) < stop_after;
  };
  return cb;
}

class StreamSpeculative : public ::testing::TestWithParam<Arch> {};

TEST_P(StreamSpeculative, DraftsGiveThePlainGreedyStream) {
  const auto model = test::load_model(test::micro_model_spec(GetParam()));
  constexpr int kTokens = 160;
  auto plain = started(model);
  Out want;
  want.result = generate_stream(*plain, kTokens, EogPolicy::stop, collect(want));
  const std::vector<uint8_t> want_bytes = session_to_bytes(*plain);
  ASSERT_GT(plain->ring_session().ring().clock(), 64u) << "the window must wrap";

  NgramDrafter ngram(3, 1);
  ModelDrafter self(test::load_model(test::micro_model_spec(GetParam())), *model,
                    SessionConfig{.n_ctx = 48, .n_threads = 1});
  struct Case {
    const char* name;
    Drafter* drafter;
    int draft_max;
  };
  for (const Case c : {Case{"ngram", &ngram, 1}, Case{"ngram", &ngram, 4}, Case{"ngram", &ngram, 8},
                       Case{"model", &self, 8}, Case{"none", nullptr, 0}}) {
    SCOPED_TRACE(std::string(c.name) + " draft_max " + std::to_string(c.draft_max));
    auto s = started(model);
    Out got;
    SpeculativeStats st;
    got.result = generate_stream_speculative(*s, kTokens, c.drafter, c.draft_max, prompt(),
                                             collect(got), &st);
    EXPECT_EQ(got.tokens, want.tokens);
    EXPECT_EQ(got.text, want.text);
    EXPECT_EQ(got.new_spans, want.new_spans);
    EXPECT_EQ(got.result.n_generated, want.result.n_generated);
    EXPECT_EQ(got.result.stop, want.result.stop);
    EXPECT_EQ(s->span_state(), plain->span_state());
    EXPECT_TRUE(session_to_bytes(*s) == want_bytes)
        << "the session differs from plain generation's";
    EXPECT_EQ(st.generated, static_cast<int>(want.tokens.size()));
    if (c.drafter != nullptr) {
      EXPECT_GT(st.accepted, 0);
    }
    std::printf(
        "[ stream speculative ] %s draft_max %d: %d verifies, %d/%d drafts accepted, %d spans\n",
        c.name, c.draft_max, st.verify_steps, st.accepted, st.drafted, got.new_spans);
  }
}

// on_token returning false in the middle of a verify: the tokens after it are rolled back, so
// the session is the one plain generation leaves when stopped at the same token.
TEST_P(StreamSpeculative, StoppingMidVerifyKeepsOnlyTheTokensSeen) {
  const auto model = test::load_model(test::micro_model_spec(GetParam()));
  ModelDrafter self(test::load_model(test::micro_model_spec(GetParam())), *model,
                    SessionConfig{.n_ctx = 48, .n_threads = 1});
  for (int stop_after : {1, 3, 13}) {
    auto plain = started(model);
    Out want;
    generate_stream(*plain, 100, EogPolicy::stop, collect(want, stop_after));
    auto s = started(model);
    Out got;
    const StreamGenerateResult r =
        generate_stream_speculative(*s, 100, &self, 8, prompt(), collect(got, stop_after));
    EXPECT_EQ(r.stop, StopReason::cancelled);
    EXPECT_EQ(got.tokens, want.tokens) << stop_after;
    EXPECT_TRUE(session_to_bytes(*s) == session_to_bytes(*plain)) << stop_after;
  }
}

// Text with sentence ends fed as verifies of 1 .. 9 tokens, each keeping a prefix and
// rejecting a wrong tail (which holds sentence ends of its own): the spans, evictions and
// the whole session equal feeding the same text one token at a time, as next() does.
TEST_P(StreamSpeculative, TentativeFeedsCutSpansAsOneTokenFeeds) {
  const auto model = test::load_model(test::micro_model_spec(GetParam()));
  std::string text;
  for (int i = 0; i < 12; ++i) text += "It rains. We stay in! Do we? Yes, we do. ";
  const std::vector<int32_t> tokens = model->tokenizer().encode(text, false, false);
  const std::vector<int32_t> wrong = model->tokenizer().encode("No! Go. ", false, false);
  ASSERT_GT(tokens.size(), 300u);
  auto plain = started(model);
  for (const int32_t t : tokens) plain->feed(SpanType::response_sentence, {&t, 1});
  auto s = started(model);
  size_t at = 0;
  for (int step = 0; at < tokens.size(); ++step) {
    const size_t keep = std::min<size_t>(1 + (step * 5) % 9, tokens.size() - at);
    const size_t tail = static_cast<size_t>(step % 3 == 0 ? 0 : (step * 7) % (10 - keep));
    std::vector<int32_t> batch(tokens.begin() + static_cast<std::ptrdiff_t>(at),
                               tokens.begin() + static_cast<std::ptrdiff_t>(at + keep));
    for (size_t i = 0; i < tail; ++i) batch.push_back(wrong[i % wrong.size()]);
    s->feed_tentative(SpanType::response_sentence, batch);
    ASSERT_EQ(s->keep_tentative(keep), keep);
    at += keep;
  }
  EXPECT_EQ(s->span_state(), plain->span_state());
  EXPECT_EQ(s->ring_session().ring().clock(), plain->ring_session().ring().clock());
  EXPECT_TRUE(session_to_bytes(*s) == session_to_bytes(*plain));
  EXPECT_EQ(s->logits().size(), plain->logits().size());
  EXPECT_TRUE(std::equal(s->logits().begin(), s->logits().end(), plain->logits().begin()));
}

INSTANTIATE_TEST_SUITE_P(Micro, StreamSpeculative,
                         ::testing::Values(Arch::llama, Arch::gemma3, Arch::bounded),
                         test::arch_test_name);

TEST(StreamSpeculativeErrors, BadSettingsAreOneLineBeforeAnyWork) {
  const auto model = test::load_model(test::micro_model_spec(Arch::llama));
  NgramDrafter ngram;
  auto s = started(model);
  const uint64_t clock = s->clock();
  auto expect_error = [&](const std::function<void()>& fn, const char* what) {
    try {
      fn();
      ADD_FAILURE() << "no error: " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
    }
    EXPECT_EQ(s->clock(), clock);
  };
  // A verify of draft_max + 1 tokens must fit the probe reserve (9).
  expect_error([&] { generate_stream_speculative(*s, 10, &ngram, 9, {}, {}); }, "probe reserve");
  expect_error([&] { generate_stream_speculative(*s, 10, &ngram, -1, {}, {}); }, "draft-max");
  StreamGenerateCallbacks constrained;
  constrained.allowed = [](int32_t) { return true; };
  expect_error([&] { generate_stream_speculative(*s, 10, &ngram, 4, {}, constrained); },
               "constrained");
  SamplerConfig warm = greedy();
  warm.temperature = 0.7f;
  s->set_sampler(warm);
  expect_error([&] { generate_stream_speculative(*s, 10, &ngram, 4, {}, {}); }, "greedy");
  SamplerConfig penalised = greedy();
  penalised.repeat_penalty = 1.1f;
  s->set_sampler(penalised);
  expect_error([&] { generate_stream_speculative(*s, 10, &ngram, 4, {}, {}); }, "greedy");
  // A ring without a probe reserve cannot verify at all.
  RingSessionConfig none = geometry();
  none.ring.probe_reserve = 0;
  StreamSession bare(model, none, greedy());
  const int32_t t[] = {2, 40};
  bare.append(SpanType::system, t);
  bare.seal();
  EXPECT_THROW(generate_stream_speculative(bare, 10, &ngram, 1, {}, {}), Error);
  // keep_tentative keeps no more than was fed.
  auto k = started(model);
  const int32_t two[] = {60, 71};
  k->feed_tentative(SpanType::response_sentence, two);
  EXPECT_THROW(k->keep_tentative(3), Error);
  EXPECT_EQ(k->keep_tentative(2), 2u);
}

}  // namespace
}  // namespace channel
