#include "runtime/generate.h"

#include <gtest/gtest.h>

#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/model.h"
#include "runtime/session.h"
#include "testdata.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace channel {
namespace {

// A stand-in session whose next token is always (last token + 1) mod n_vocab.
class CountingModel final : public SessionBase {
 public:
  CountingModel(int32_t n_vocab, int32_t n_ctx) : SessionBase(nullptr, n_vocab, 1), n_ctx_(n_ctx) {}

  int64_t room() const override { return n_ctx_ - n_past_; }
  int verify_capacity() const override { return 1; }
  const char* verify_capacity_hint() const override { return "no truncation"; }
  int32_t n_past() const { return n_past_; }

  std::vector<int32_t> batches;  // size of every decode call

 private:
  void check_room(size_t n) const override {
    EXPECT_LE(n_past_ + static_cast<int32_t>(n), n_ctx_) << "decoded past the context";
  }
  void run(std::span<const int32_t> tokens, float* all) override {
    ASSERT_EQ(all, nullptr);
    n_past_ += static_cast<int32_t>(tokens.size());
    batches.push_back(static_cast<int32_t>(tokens.size()));
    std::fill(logits_.begin(), logits_.end(), 0.0f);
    logits_[static_cast<size_t>((tokens.back() + 1) % static_cast<int32_t>(logits_.size()))] = 10;
  }
  void truncate(int) override { FAIL() << "not used"; }

  int32_t n_ctx_;
  int32_t n_past_ = 0;
};

SamplerConfig greedy() {
  SamplerConfig s;
  s.temperature = 0.0f;
  return s;
}

struct Collected {
  std::vector<int32_t> tokens;
  GenerateCallbacks callbacks(int32_t end_token = -1, int stop_after = -1) {
    GenerateCallbacks cb;
    cb.is_end_of_generation = [end_token](int32_t t) { return t == end_token; };
    cb.on_token = [this, stop_after](int32_t t) {
      tokens.push_back(t);
      return stop_after < 0 || static_cast<int>(tokens.size()) < stop_after;
    };
    return cb;
  }
};

TEST(Generate, PrefillsOnceThenDecodesOneTokenAtATime) {
  CountingModel model(100, 64);
  Sampler sampler(greedy());
  Collected out;
  const std::vector<int32_t> prompt = {1, 7, 8};
  const auto stats = generate_tokens(model, sampler, prompt, 5, out.callbacks());
  EXPECT_EQ(out.tokens, (std::vector<int32_t>{9, 10, 11, 12, 13}));
  EXPECT_EQ(model.batches, (std::vector<int32_t>{3, 1, 1, 1, 1}));
  EXPECT_EQ(model.n_past(), 3 + 5 - 1);  // the last token is pending
  EXPECT_EQ(stats.stop, StopReason::max_tokens);
  EXPECT_EQ(stats.n_prompt, 3);
  EXPECT_EQ(stats.n_generated, 5);
  EXPECT_EQ(stats.n_decoded, 4);
  EXPECT_GE(stats.prompt_seconds, 0.0);
  // The prompt and the generated tokens are in the penalty history.
  EXPECT_EQ(sampler.recent_tokens(), (std::vector<int32_t>{1, 7, 8, 9, 10, 11, 12, 13}));
}

TEST(Generate, StopsAtEndOfGenerationWithoutPassingItOn) {
  CountingModel model(100, 64);
  Sampler sampler(greedy());
  Collected out;
  const std::vector<int32_t> prompt = {2};
  const auto stats = generate_tokens(model, sampler, prompt, 50, out.callbacks(/*end=*/6));
  EXPECT_EQ(out.tokens, (std::vector<int32_t>{3, 4, 5}));
  EXPECT_EQ(stats.stop, StopReason::end_of_generation);
  EXPECT_EQ(stats.n_generated, 3);
}

TEST(Generate, StopsWhenTheContextIsFull) {
  CountingModel model(100, 8);
  Sampler sampler(greedy());
  Collected out;
  const std::vector<int32_t> prompt = {0, 1, 2};
  const auto stats = generate_tokens(model, sampler, prompt, -1, out.callbacks());
  // 8 positions: 3 prompt + 5 decoded, plus one last sampled token from the 8th.
  EXPECT_EQ(out.tokens.size(), 6u);
  EXPECT_EQ(model.n_past(), 8);
  EXPECT_EQ(stats.stop, StopReason::context_full);
}

TEST(Generate, PromptFillingTheContextStillYieldsOneToken) {
  CountingModel model(100, 4);
  Sampler sampler(greedy());
  Collected out;
  const std::vector<int32_t> prompt = {0, 1, 2, 3};
  const auto stats = generate_tokens(model, sampler, prompt, 10, out.callbacks());
  EXPECT_EQ(out.tokens, (std::vector<int32_t>{4}));
  EXPECT_EQ(stats.stop, StopReason::context_full);
}

TEST(Generate, CallbackCanCancel) {
  CountingModel model(100, 64);
  Sampler sampler(greedy());
  Collected out;
  const std::vector<int32_t> prompt = {0};
  const auto stats = generate_tokens(model, sampler, prompt, 10, out.callbacks(-1, 2));
  EXPECT_EQ(out.tokens, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(stats.stop, StopReason::cancelled);
}

TEST(Generate, ZeroBudgetOnlyPrefills) {
  CountingModel model(100, 64);
  Sampler sampler(greedy());
  Collected out;
  const std::vector<int32_t> prompt = {0, 1};
  const auto stats = generate_tokens(model, sampler, prompt, 0, out.callbacks());
  EXPECT_TRUE(out.tokens.empty());
  EXPECT_EQ(model.n_past(), 2);
  EXPECT_EQ(stats.n_generated, 0);
}

TEST(Generate, RejectsAPromptLongerThanTheContextAndAnEmptyOne) {
  CountingModel model(100, 4);
  Sampler sampler(greedy());
  Collected out;
  const std::vector<int32_t> prompt = {0, 1, 2, 3, 4};
  try {
    generate_tokens(model, sampler, prompt, 10, out.callbacks());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("prompt is 5 tokens"), std::string::npos) << e.what();
  }
  EXPECT_EQ(model.n_past(), 0);
  EXPECT_THROW(generate_tokens(model, sampler, {}, 10, out.callbacks()), Error);
}

TEST(Generate, ContinuesAfterEarlierTokens) {
  CountingModel model(100, 6);
  Sampler sampler(greedy());
  Collected out;
  const std::vector<int32_t> first = {0, 1, 2};
  generate_tokens(model, sampler, first, 2, out.callbacks());  // n_past = 4
  const std::vector<int32_t> second = {50, 51, 52};            // 4 + 3 > 6
  EXPECT_THROW(generate_tokens(model, sampler, second, 2, out.callbacks()), Error);
}

TEST(Generate, SeededSamplingIsReproducible) {
  auto run = [](uint64_t seed) {
    CountingModel model(40, 256);
    SamplerConfig cfg;
    cfg.temperature = 3.0f;  // flat enough that non-argmax tokens get drawn
    cfg.top_k = 0;
    cfg.top_p = 1.0f;
    cfg.min_p = 0.0f;
    cfg.seed = seed;
    Sampler sampler(cfg);
    Collected out;
    const std::vector<int32_t> prompt = {0};
    generate_tokens(model, sampler, prompt, 100, out.callbacks());
    return out.tokens;
  };
  EXPECT_EQ(run(1), run(1));
  EXPECT_NE(run(1), run(2));
}

// stories260K, a real trained model: greedy generation through a Session reproduces
// the reference token ids of llama2.c and llama.cpp for every prompt of greedy.json.
TEST(GenerateStories260K, GreedyIdsMatchTheReference) {
  CHANNEL_REQUIRE_TESTDATA();
  const auto model = Model::load(test::testdata_path("stories260K/stories260K.gguf"));
  std::ifstream in(test::testdata_path("stories260K/greedy.json"));
  const auto reference = nlohmann::json::parse(in);
  ASSERT_FALSE(reference["cases"].empty());
  for (const auto& c : reference["cases"]) {
    const std::string prompt_text = c["prompt"];
    const auto expected_prompt = c["llama2c"]["prompt_ids"].get<std::vector<int32_t>>();
    const auto expected_gen = c["llama2c"]["gen_ids"].get<std::vector<int32_t>>();
    const Tokenizer& tok = model->tokenizer();
    const auto prompt = tok.encode(prompt_text, tok.add_bos_default(), true);
    ASSERT_EQ(prompt, expected_prompt) << "prompt '" << prompt_text << "'";

    Session session(model, SessionConfig{.n_ctx = 512, .n_threads = 1});
    Sampler sampler(greedy());
    std::vector<int32_t> got;
    GenerateCallbacks cb;
    cb.is_end_of_generation = [&](int32_t t) { return tok.is_end_of_generation(t); };
    cb.on_token = [&](int32_t t) {
      got.push_back(t);
      return true;
    };
    const auto stats =
        generate_tokens(session, sampler, prompt, static_cast<int32_t>(expected_gen.size()), cb);
    EXPECT_EQ(got, expected_gen) << "prompt '" << prompt_text << "'";
    EXPECT_EQ(stats.stop, StopReason::max_tokens);
  }
}

// The streamed text is the prompt's continuation: "Once upon a time" + stream is a
// prefix of llama2.c's output, and equals decoding all ids at once.
TEST(GenerateStories260K, StreamedTextMatchesReferenceText) {
  CHANNEL_REQUIRE_TESTDATA();
  const auto model = Model::load(test::testdata_path("stories260K/stories260K.gguf"));
  std::ifstream in(test::testdata_path("stories260K/greedy.json"));
  const auto reference = nlohmann::json::parse(in);
  std::string expected;
  for (const auto& c : reference["cases"]) {
    if (c["prompt"] == "Once upon a time") expected = c["llama2c"]["stdout"];
  }
  ASSERT_FALSE(expected.empty());
  const Tokenizer& tok = model->tokenizer();
  const auto prompt = tok.encode("Once upon a time", true, true);
  Session session(model, SessionConfig{.n_ctx = 256, .n_threads = 2});

  Sampler sampler(greedy());
  std::string streamed;
  size_t calls = 0;
  const auto stats = generate_text(session, tok, sampler, prompt, 100, [&](std::string_view piece) {
    streamed += piece;
    ++calls;
    return true;
  });
  EXPECT_EQ(stats.n_generated, 100);
  EXPECT_GT(calls, 50u);  // streamed piece by piece, not at the end
  const std::string text = "Once upon a time" + streamed;
  EXPECT_EQ(expected.substr(0, text.size()), text);
}

TEST(GenerateStories260K, SameSeedSameTextAcrossThreadCounts) {
  CHANNEL_REQUIRE_TESTDATA();
  const auto model = Model::load(test::testdata_path("stories260K/stories260K.gguf"));
  auto run = [&](uint64_t seed, int threads) {
    Session session(model, SessionConfig{.n_ctx = 256, .n_threads = threads});
    SamplerConfig cfg;
    cfg.seed = seed;
    Sampler sampler(cfg);
    std::string text;
    const auto prompt = model->tokenizer().encode("Lily and Tom went", true, true);
    generate_text(session, model->tokenizer(), sampler, prompt, 80, [&](std::string_view p) {
      text += p;
      return true;
    });
    return text;
  };
  const std::string a = run(3, 1);
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a, run(3, 1));
  EXPECT_EQ(a, run(3, 2));
  EXPECT_NE(a, run(4, 1));
}

}  // namespace
}  // namespace channel
