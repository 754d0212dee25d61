// score_prompt: each token's log-probability given the ones before it, across the 64-row
// chunks it runs in, is the one a plain session decoding the prefix gives.
#include <gtest/gtest.h>

#include "runtime/prompt_scoring.h"
#include "runtime/session.h"
#include "support/micro_model.h"
#include "util/error.h"

namespace channel {
namespace {

TEST(PromptScoring, EachTokenGivenTheOnesBeforeIt) {
  const auto model = test::load_model(test::micro_model_spec(Arch::gemma3));
  std::vector<int32_t> tokens;
  for (int i = 0; i < 150; ++i) tokens.push_back((i * 37 + 11) % 300);  // crosses two chunks
  const std::vector<StepLogprobs> scores = score_prompt(model, tokens, 2, 1);
  ASSERT_EQ(scores.size(), tokens.size());
  EXPECT_EQ(scores[0].logprob, 0.0f);
  EXPECT_TRUE(scores[0].top.empty());
  Session plain(model, SessionConfig{.n_ctx = 256, .n_threads = 1});
  for (size_t i = 0; i + 1 < tokens.size(); ++i) {
    const std::span<const float> logits = plain.decode(std::span<const int32_t>(&tokens[i], 1));
    const StepLogprobs want = step_logprobs(logits, tokens[i + 1], 2);
    EXPECT_NEAR(scores[i + 1].logprob, want.logprob, 1e-4) << i + 1;
    ASSERT_EQ(scores[i + 1].top.size(), 2u);
    EXPECT_EQ(scores[i + 1].top[0].first, want.top[0].first) << i + 1;
  }
  EXPECT_EQ(score_prompt(model, std::span<const int32_t>(tokens.data(), 1), 2, 1).size(), 1u);
  tokens.back() = 300;  // outside the vocabulary, even as the last (never run) token
  EXPECT_THROW(score_prompt(model, tokens, 2, 1), Error);
}

}  // namespace
}  // namespace channel
