// Recall copy (memory/recall_copy.h): the longest run the context ends with, found in a
// recalled episode, lends its continuation a logit bonus that grows with the run.
#include "memory/recall_copy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace channel {
namespace {

using Tokens = std::vector<int32_t>;

size_t apply(std::vector<float>& logits, const Tokens& context, const std::vector<Tokens>& srcs,
             float bias = 3.0f) {
  std::vector<std::span<const int32_t>> spans(srcs.begin(), srcs.end());
  RecallCopyConfig c;
  c.bias = bias;
  return apply_recall_copy(logits, context, spans, c);
}

TEST(RecallCopy, OneSharedTokenIsNoEvidence) {
  std::vector<float> logits(16, 0.0f);
  EXPECT_EQ(apply(logits, {9, 5}, {{1, 5, 7, 2}}), 0u);
  EXPECT_EQ(logits, std::vector<float>(16, 0.0f));
}

TEST(RecallCopy, ARunOfTwoLendsItsContinuationTheBias) {
  std::vector<float> logits(16, 0.0f);
  EXPECT_EQ(apply(logits, {9, 4, 5}, {{1, 4, 5, 7, 2}}), 2u);
  for (int t = 0; t < 16; ++t) EXPECT_EQ(logits[t], t == 7 ? 3.0f : 0.0f) << t;
}

TEST(RecallCopy, TheBonusGrowsByTheBiasForEachDoublingOfTheRunUpToFour) {
  std::vector<float> logits(16, 0.0f);
  EXPECT_EQ(apply(logits, {1, 2, 3, 4}, {{1, 2, 3, 4, 8}}), 4u);
  EXPECT_FLOAT_EQ(logits[8], 6.0f);
  std::vector<float> l8(16, 0.0f);  // a run of 8: no more than a run of 4
  EXPECT_EQ(apply(l8, {1, 2, 3, 4, 5, 6, 7, 9}, {{1, 2, 3, 4, 5, 6, 7, 9, 10}}), 8u);
  EXPECT_FLOAT_EQ(l8[10], 6.0f);
}

TEST(RecallCopy, TheLongestMatchWinsAcrossEpisodes) {
  // {4, 5} continues with 6 in the first episode, {3, 4, 5} with 11 in the second.
  std::vector<float> logits(16, 0.0f);
  EXPECT_EQ(apply(logits, {3, 4, 5}, {{4, 5, 6}, {2, 3, 4, 5, 11}}), 3u);
  EXPECT_EQ(logits[6], 0.0f);
  EXPECT_FLOAT_EQ(logits[11], 3.0f * std::log2(3.0f));
}

TEST(RecallCopy, EveryContinuationOfTheLongestMatchOnce) {
  std::vector<float> logits(16, 0.0f);
  EXPECT_EQ(apply(logits, {4, 5}, {{4, 5, 6, 4, 5, 12, 4, 5, 6}}), 2u);
  EXPECT_EQ(logits[6], 3.0f);  // twice in the episode, one bonus
  EXPECT_EQ(logits[12], 3.0f);
}

TEST(RecallCopy, AMatchAtTheEndOfAnEpisodeHasNoContinuation) {
  std::vector<float> logits(16, 0.0f);
  EXPECT_EQ(apply(logits, {4, 5}, {{1, 4, 5}}), 0u);
  EXPECT_EQ(logits, std::vector<float>(16, 0.0f));
}

TEST(RecallCopy, OffOrWithoutSourcesNothingChanges) {
  std::vector<float> logits(16, 0.0f);
  EXPECT_EQ(apply(logits, {4, 5}, {{4, 5, 6}}, 0.0f), 0u);
  EXPECT_EQ(apply(logits, {4, 5}, {}), 0u);
  EXPECT_EQ(apply(logits, {}, {{4, 5, 6}}), 0u);
  EXPECT_EQ(logits, std::vector<float>(16, 0.0f));
}

TEST(RecallCopy, TokensOutsideTheVocabularyAreIgnored) {
  std::vector<float> logits(8, 0.0f);
  EXPECT_EQ(apply(logits, {4, 5}, {{4, 5, 99}, {4, 5, -3}}), 2u);
  EXPECT_EQ(logits, std::vector<float>(8, 0.0f));
}

}  // namespace
}  // namespace channel
