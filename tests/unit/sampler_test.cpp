#include "runtime/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "util/error.h"

namespace channel {
namespace {

std::vector<int32_t> ids_of(const CandidateList& c) {
  std::vector<int32_t> out;
  for (const auto& t : c.items) out.push_back(t.id);
  return out;
}

CandidateList from_logits(const std::vector<float>& logits) {
  CandidateList c;
  c.assign(logits);
  return c;
}

// Logits whose softmax is exactly the given probabilities.
std::vector<float> log_of(const std::vector<double>& probs) {
  std::vector<float> out;
  for (double p : probs) out.push_back(static_cast<float>(std::log(p)));
  return out;
}

SamplerConfig plain(float temperature, uint64_t seed = 1) {
  SamplerConfig s;
  s.temperature = temperature;
  s.top_k = 0;
  s.top_p = 1.0f;
  s.min_p = 0.0f;
  s.repeat_penalty = 1.0f;
  s.seed = seed;
  return s;
}

TEST(Rng, Xoshiro256StarStarFromSplitmix64) {
  // Pinned outputs (computed with an independent Python transcription of the algorithm).
  Rng r(42);
  EXPECT_EQ(r.next_u64(), 0x15780b2e0c2ec716ULL);
  EXPECT_EQ(r.next_u64(), 0x6104d9866d113a7eULL);
  EXPECT_EQ(r.next_u64(), 0xae17533239e499a1ULL);
  EXPECT_EQ(r.next_u64(), 0xecb8ad4703b360a1ULL);
  Rng z(0);
  EXPECT_EQ(z.next_u64(), 0x99ec5f36cb75f2b4ULL);
  EXPECT_EQ(z.next_u64(), 0xbf6e1f784956452aULL);
}

TEST(Rng, DoublesAreInUnitInterval) {
  Rng r(7);
  double lo = 1.0, hi = 0.0, sum = 0.0;
  for (int i = 0; i < 10000; ++i) {
    const double u = r.next_double();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    lo = std::min(lo, u);
    hi = std::max(hi, u);
    sum += u;
  }
  EXPECT_LT(lo, 0.01);
  EXPECT_GT(hi, 0.99);
  EXPECT_NEAR(sum / 10000, 0.5, 0.02);
}

TEST(SamplerFilters, TopKKeepsTheLargestWithTiesToLowerId) {
  auto c = from_logits({1, 5, 3, 5, 2});
  apply_top_k(c, 2);
  EXPECT_EQ(ids_of(c), (std::vector<int32_t>{1, 3}));
  EXPECT_TRUE(c.sorted);

  auto all = from_logits({1, 5, 3});
  apply_top_k(all, 10);  // k beyond the size keeps everything, sorted
  EXPECT_EQ(ids_of(all), (std::vector<int32_t>{1, 2, 0}));

  auto off = from_logits({1, 5, 3});
  apply_top_k(off, 0);
  EXPECT_EQ(ids_of(off), (std::vector<int32_t>{0, 1, 2}));
}

TEST(SamplerFilters, TopPKeepsSmallestPrefixReachingP) {
  // probabilities 0.05, 0.5, 0.15, 0.3 -> sorted 0.5 (id 1), 0.3 (3), 0.15 (2), 0.05 (0)
  const auto logits = log_of({0.05, 0.5, 0.15, 0.3});
  auto c = from_logits(logits);
  apply_top_p(c, 0.75f);  // 0.5 < 0.75 <= 0.8
  EXPECT_EQ(ids_of(c), (std::vector<int32_t>{1, 3}));
  c = from_logits(logits);
  apply_top_p(c, 0.81f);  // 0.8 < 0.81 <= 0.95
  EXPECT_EQ(ids_of(c), (std::vector<int32_t>{1, 3, 2}));
  c = from_logits(logits);
  apply_top_p(c, 0.0f);  // always keeps one
  EXPECT_EQ(ids_of(c), (std::vector<int32_t>{1}));
  c = from_logits(logits);
  apply_top_p(c, 1.0f);  // off
  EXPECT_EQ(c.items.size(), 4u);
}

TEST(SamplerFilters, TopPOnLargeUnsortedListSortsBeyondTheFirstBlock) {
  // 2000 equal logits: the mass needed for p = 0.5 spans 1000 tokens, past the
  // 256-entry partial sort, so the filter must finish the sort.
  std::vector<float> logits(2000, 0.0f);
  auto c = from_logits(logits);
  apply_top_p(c, 0.5f);
  ASSERT_NEAR(static_cast<double>(c.items.size()), 1000.0, 2.0);
  for (size_t i = 0; i < c.items.size(); ++i) EXPECT_EQ(c.items[i].id, static_cast<int32_t>(i));
}

// Deep prefixes (past 256, past 8 x 256) on distinct and tied logits: the filter's stepwise
// selection gives the whole list's sort, cut where the mass first reaches p.
TEST(SamplerFilters, TopPIsTheFullSortsPrefix) {
  for (const float p : {0.2f, 0.6f, 0.97f, 1.0f - 1e-7f})
    for (const int grid : {0, 3}) {
      std::vector<float> logits(30000);
      for (size_t i = 0; i < logits.size(); ++i) {
        const float u = static_cast<float>((i * 7919) % 30011) / 30011.0f;  // a shuffled ramp
        logits[i] = grid ? std::round(u * 4.0f * grid) / grid : u * 4.0f;
      }
      auto c = from_logits(logits);
      apply_top_p(c, p);
      auto full = from_logits(logits);
      std::sort(full.items.begin(), full.items.end(), ranks_before);
      double sum = 0.0, cum = 0.0;
      const float max_logit = full.items.front().logit;
      for (const float l : logits) sum += std::exp(l - max_logit);
      size_t keep = full.items.size();
      for (size_t i = 0; i < full.items.size(); ++i) {
        cum += static_cast<float>(std::exp(full.items[i].logit - max_logit) / sum);
        if (cum >= p) {
          keep = i + 1;
          break;
        }
      }
      ASSERT_EQ(c.items.size(), keep) << "p " << p << " grid " << grid;
      for (size_t i = 0; i < keep; ++i)
        ASSERT_EQ(c.items[i].id, full.items[i].id) << "p " << p << " at " << i;
      EXPECT_TRUE(c.sorted);
    }
}

TEST(SamplerFilters, MinPKeepsTokensAboveFractionOfMax) {
  // probabilities 0.5, 0.3, 0.15, 0.05; min_p 0.25 -> threshold 0.125 keeps three
  const auto logits = log_of({0.5, 0.3, 0.15, 0.05});
  auto c = from_logits(logits);
  apply_min_p(c, 0.25f);
  EXPECT_EQ(ids_of(c), (std::vector<int32_t>{0, 1, 2}));
  c = from_logits(logits);
  apply_min_p(c, 0.35f);  // threshold 0.175 keeps two
  EXPECT_EQ(ids_of(c), (std::vector<int32_t>{0, 1}));
  c = from_logits(logits);
  apply_min_p(c, 1.0f);  // only the maximum
  EXPECT_EQ(ids_of(c), (std::vector<int32_t>{0}));
  c = from_logits(logits);
  apply_min_p(c, 0.0f);
  EXPECT_EQ(c.items.size(), 4u);
}

TEST(SamplerFilters, TemperatureScalesLogitsAndZeroKeepsArgmax) {
  auto c = from_logits({1.0f, -4.0f, 3.0f});
  apply_temperature(c, 2.0f);
  EXPECT_FLOAT_EQ(c.items[0].logit, 0.5f);
  EXPECT_FLOAT_EQ(c.items[1].logit, -2.0f);
  EXPECT_FLOAT_EQ(c.items[2].logit, 1.5f);
  c = from_logits({1.0f, 3.0f, 3.0f});
  apply_temperature(c, 0.0f);
  EXPECT_EQ(ids_of(c), (std::vector<int32_t>{1}));
}

TEST(SamplerFilters, RepeatPenaltyDividesPositiveAndMultipliesNegative) {
  auto c = from_logits({2.0f, -2.0f, 1.0f, 0.0f});
  const std::vector<int32_t> recent = {0, 1, 1, 3};  // 1 twice: penalised once
  apply_repeat_penalty(c, recent, 2.0f);
  EXPECT_FLOAT_EQ(c.items[0].logit, 1.0f);
  EXPECT_FLOAT_EQ(c.items[1].logit, -4.0f);
  EXPECT_FLOAT_EQ(c.items[2].logit, 1.0f);
  EXPECT_FLOAT_EQ(c.items[3].logit, 0.0f);
}

TEST(SamplerFilters, NanLogitsAreNeverChosen) {
  auto c = from_logits({NAN, 1.0f, NAN});
  Rng r(3);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(draw(c, r), 1);
  Sampler greedy(plain(0.0f));
  const std::vector<float> logits = {NAN, -1.0f, NAN};
  EXPECT_EQ(greedy.sample(logits), 1);
}

TEST(Sampler, GreedyIsArgmaxWithPenaltyApplied) {
  SamplerConfig cfg = plain(0.0f);
  cfg.repeat_penalty = 2.0f;
  cfg.repeat_last_n = 2;
  Sampler s(cfg);
  const std::vector<float> logits = {3.0f, 2.0f, 1.0f, -1.0f};
  EXPECT_EQ(s.sample(logits), 0);
  s.accept(0);  // 3 -> 1.5, so 1 (2.0) wins
  EXPECT_EQ(s.sample(logits), 1);
  s.accept(1);  // recent = {0, 1}: 0 -> 1.5 beats 1 -> 1.0 and 2 at 1.0
  EXPECT_EQ(s.sample(logits), 0);
  s.accept(2);  // window of 2 drops 0: recent = {1, 2}
  EXPECT_EQ(s.recent_tokens(), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(s.sample(logits), 0);
  s.reset();
  EXPECT_TRUE(s.recent_tokens().empty());
}

// OpenAI's penalties: a recent token loses count * frequency + presence, after the repetition
// penalty, over the same window; negative values favour repeats.
TEST(Sampler, PresenceAndFrequencyPenaltiesCountTheRecentTokens) {
  SamplerConfig cfg = plain(0.0f);
  cfg.presence_penalty = 0.5f;
  cfg.frequency_penalty = 0.4f;
  cfg.repeat_last_n = 3;
  Sampler s(cfg);
  const std::vector<float> logits = {3.0f, 2.2f, 1.0f, -1.0f};
  EXPECT_EQ(s.sample(logits), 0);
  s.accept(0);  // 0: 3 - 0.4 - 0.5 = 2.1 < 2.2
  EXPECT_EQ(s.sample(logits), 1);
  s.accept(1);  // 1: 2.2 - 0.9 = 1.3; 0 at 2.1 wins again
  EXPECT_EQ(s.sample(logits), 0);
  s.accept(0);  // recent {0, 1, 0}: 0 at 3 - 0.8 - 0.5 = 1.7 beats 1 at 1.3
  EXPECT_EQ(s.sample(logits), 0);
  s.accept(0);  // {1, 0, 0}: the same
  s.accept(0);  // {0, 0, 0}: 0 at 3 - 1.2 - 0.5 = 1.3 < 2.2
  EXPECT_EQ(s.sample(logits), 1);
  // With the repetition penalty first: 3 / 2 = 1.5, then - 0.4 - 0.5 = 0.6 < 1.0.
  cfg.repeat_penalty = 2.0f;
  cfg.repeat_last_n = 1;
  Sampler r(cfg);
  r.accept(0);
  r.accept(1);  // only 1 is recent: 2.2 / 2 - 0.9 = 0.2
  EXPECT_EQ(r.sample(logits), 0);
  r.accept(0);
  EXPECT_EQ(r.sample(logits), 1);  // 0: 0.6; 1: 2.2
  // Negative: a repeat is favoured.
  cfg = plain(0.0f);
  cfg.presence_penalty = -2.0f;
  Sampler f(cfg);
  f.accept(2);
  EXPECT_EQ(f.sample(logits), 0);  // 1.0 + 2.0 = 3.0 ties 0 at 3.0: the lower id wins
  cfg.frequency_penalty = -0.1f;
  Sampler g(cfg);
  g.accept(2);
  EXPECT_EQ(g.sample(logits), 2);  // 3.1
}

// The configuration's logit bias adds to the hook's, before the penalties, on a copy.
TEST(Sampler, ConfiguredLogitBiasAddsToTheLogits) {
  SamplerConfig cfg = plain(0.0f);
  cfg.logit_bias = {{2, 1.5f}, {99, 100.0f}};  // 99: outside the vocabulary, ignored
  Sampler s(cfg);
  const std::vector<float> logits = {0.0f, 2.0f, 1.0f};
  EXPECT_EQ(s.sample(logits), 2);  // 2.5 > 2.0
  EXPECT_EQ(logits[2], 1.0f);
  s.set_logit_bias([](size_t, std::vector<LogitEdit>& e) { e.push_back({1, 1.0f}); });
  EXPECT_EQ(s.sample(logits), 1);  // 3.0 > 2.5
  cfg.logit_bias = {{1, -100.0f}};
  cfg.temperature = 1.0f;
  Sampler banned(cfg);
  for (int i = 0; i < 50; ++i) EXPECT_NE(banned.sample(logits), 1);
}

TEST(Sampler, GreedyMatchesFullChainAtZeroTemperature) {
  // The greedy fast path must agree with running every filter.
  Rng noise(11);
  std::vector<float> logits(1000);
  for (auto& l : logits) l = static_cast<float>(noise.next_double() * 10.0 - 5.0);
  SamplerConfig cfg;
  cfg.temperature = 0.0f;
  cfg.repeat_penalty = 1.3f;
  Sampler s(cfg);
  for (int step = 0; step < 20; ++step) {
    CandidateList c;
    c.assign(logits);
    const auto recent = s.recent_tokens();
    apply_repeat_penalty(c, recent, cfg.repeat_penalty);
    apply_top_k(c, cfg.top_k);
    apply_top_p(c, cfg.top_p);
    apply_min_p(c, cfg.min_p);
    apply_temperature(c, 0.0f);
    const int32_t id = s.sample(logits);
    EXPECT_EQ(id, c.items.front().id);
    s.accept(id);
  }
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDifferent) {
  std::vector<float> logits(50);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(i % 7) * 0.3f;
  auto run = [&](uint64_t seed) {
    SamplerConfig cfg;  // llama.cpp's defaults
    cfg.top_k = 0;
    cfg.min_p = 0.0f;
    cfg.seed = seed;
    Sampler s(cfg);
    std::vector<int32_t> out;
    for (int i = 0; i < 64; ++i) {
      out.push_back(s.sample(logits));
      s.accept(out.back());
    }
    return out;
  };
  EXPECT_EQ(run(5), run(5));
  EXPECT_NE(run(5), run(6));
  // reset() replays the same draws
  SamplerConfig cfg = plain(1.0f, 9);
  Sampler s(cfg);
  const int32_t a = s.sample(logits), b = s.sample(logits);
  s.reset();
  EXPECT_EQ(s.sample(logits), a);
  EXPECT_EQ(s.sample(logits), b);
}

// reconfigured(): a resumed session given new flags goes on from the saved sampler.
TEST(Sampler, ReconfiguredKeepsTheStreamUnlessTheSeedChanges) {
  std::vector<float> logits(50);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(i % 7) * 0.3f;
  SamplerConfig cfg = plain(1.0f, 9);
  cfg.repeat_last_n = 8;
  Sampler a(cfg), b(cfg);
  for (int i = 0; i < 20; ++i) {
    const int32_t t = a.sample(logits);
    a.accept(t);
    b.accept(b.sample(logits));
  }
  // Same config and seed: it draws exactly what the original would have drawn next.
  Sampler same = a.reconfigured(cfg);
  EXPECT_EQ(same.recent_tokens(), a.recent_tokens());
  for (int i = 0; i < 10; ++i) {
    const int32_t t = a.sample(logits);
    EXPECT_EQ(same.sample(logits), t);
    a.accept(t);
    same.accept(t);
  }
  // A shorter penalty window keeps the newest tokens; the new settings apply.
  SamplerConfig shorter = cfg;
  shorter.repeat_last_n = 3;
  shorter.temperature = 0.0f;
  const Sampler s3 = b.reconfigured(shorter);
  const std::vector<int32_t> recent = b.recent_tokens();
  EXPECT_EQ(s3.recent_tokens(), std::vector<int32_t>(recent.end() - 3, recent.end()));
  EXPECT_EQ(s3.config().temperature, 0.0f);
  // Another seed starts that seed's stream.
  SamplerConfig seeded = cfg;
  seeded.seed = 77;
  EXPECT_EQ(b.reconfigured(seeded).rng().state(), Sampler(seeded).rng().state());
  SamplerConfig bad = cfg;
  bad.temperature = -1.0f;
  EXPECT_THROW(b.reconfigured(bad), Error);
}

// Pearson chi-square of observed counts against expected probabilities.
double chi_square(const std::vector<int>& counts, const std::vector<double>& probs, int n) {
  double chi = 0.0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double e = probs[i] * n;
    chi += (counts[i] - e) * (counts[i] - e) / e;
  }
  return chi;
}

TEST(Sampler, DrawFollowsTheSoftmaxDistribution) {
  const std::vector<double> probs = {0.1, 0.2, 0.3, 0.4};
  const auto logits = log_of(probs);
  Sampler s(plain(1.0f, 123));
  const int n = 20000;
  std::vector<int> counts(4, 0);
  for (int i = 0; i < n; ++i) counts[static_cast<size_t>(s.sample(logits))]++;
  // 3 degrees of freedom: P(chi2 > 16.27) = 0.001
  EXPECT_LT(chi_square(counts, probs, n), 16.27);
}

TEST(Sampler, TemperatureSharpensTheDistribution) {
  // At temperature 0.5 the probabilities become p^2 / sum(p^2).
  const std::vector<double> probs = {0.1, 0.2, 0.3, 0.4};
  std::vector<double> sharp;
  double z = 0.0;
  for (double p : probs) z += p * p;
  for (double p : probs) sharp.push_back(p * p / z);
  Sampler s(plain(0.5f, 77));
  const int n = 20000;
  std::vector<int> counts(4, 0);
  for (int i = 0; i < n; ++i) counts[static_cast<size_t>(s.sample(log_of(probs)))]++;
  EXPECT_LT(chi_square(counts, sharp, n), 16.27);
}

TEST(Sampler, FiltersRestrictWhatCanBeDrawn) {
  const auto logits = log_of({0.02, 0.4, 0.03, 0.3, 0.25});
  SamplerConfig cfg = plain(1.0f, 5);
  cfg.top_k = 2;
  Sampler s(cfg);
  std::vector<int> counts(5, 0);
  const int n = 20000;
  for (int i = 0; i < n; ++i) counts[static_cast<size_t>(s.sample(logits))]++;
  EXPECT_EQ(counts[0] + counts[2] + counts[4], 0);
  // renormalised over the two survivors: 0.4/0.7 and 0.3/0.7
  EXPECT_LT(chi_square({counts[1], counts[3]}, {0.4 / 0.7, 0.3 / 0.7}, n), 10.83);
}

TEST(Sampler, RejectsOutOfRangeConfig) {
  SamplerConfig cfg;
  cfg.temperature = -1.0f;
  EXPECT_THROW(Sampler{cfg}, Error);
  cfg = {};
  cfg.top_p = 1.5f;
  EXPECT_THROW(Sampler{cfg}, Error);
  cfg = {};
  cfg.min_p = NAN;
  EXPECT_THROW(Sampler{cfg}, Error);
  cfg = {};
  cfg.repeat_penalty = 0.0f;
  EXPECT_THROW(Sampler{cfg}, Error);
  cfg = {};
  cfg.repeat_last_n = -2;
  EXPECT_THROW(Sampler{cfg}, Error);
  cfg = {};
  cfg.presence_penalty = INFINITY;
  EXPECT_THROW(Sampler{cfg}, Error);
  cfg = {};
  cfg.frequency_penalty = NAN;
  EXPECT_THROW(Sampler{cfg}, Error);
  cfg = {};
  cfg.logit_bias = {{3, NAN}};
  EXPECT_THROW(Sampler{cfg}, Error);
  Sampler ok(SamplerConfig{});
  EXPECT_THROW(ok.sample({}), Error);
}

TEST(SamplerBias, TheLogitBiasEditsACopyAndSurvivesReconfiguration) {
  Sampler s(plain(0.0f));
  const std::vector<float> logits = {0.0f, 2.0f, 1.0f};
  EXPECT_EQ(s.sample(logits), 1);
  s.set_logit_bias([](size_t n, std::vector<LogitEdit>& e) {
    EXPECT_EQ(n, 3u);
    e.push_back({2, 5.0f});
    e.push_back({7, 100.0f});  // outside the vocabulary: ignored
  });
  EXPECT_EQ(s.sample(logits), 2);
  EXPECT_EQ(logits[2], 1.0f);  // the caller's logits are untouched
  Sampler r = s.reconfigured(plain(0.0f, 7));
  EXPECT_EQ(r.sample(logits), 2);
  SamplerConfig sampled = plain(1.0f, 3);
  Sampler t = s.reconfigured(sampled);
  t.set_logit_bias([](size_t, std::vector<LogitEdit>& e) { e.push_back({0, 100.0f}); });
  for (int i = 0; i < 20; ++i) EXPECT_EQ(t.sample(logits), 0);  // the chain sees the bias
  // A bias that asks for nothing on a step leaves the logits as they are (and copies nothing).
  int calls = 0;
  s.set_logit_bias([&calls](size_t, std::vector<LogitEdit>& e) {
    if (++calls % 2 == 0) e.push_back({0, 10.0f});
  });
  EXPECT_EQ(s.sample(logits), 1);
  EXPECT_EQ(s.sample(logits), 0);
  EXPECT_EQ(s.sample(logits), 1);  // the edits of the step before are not kept
  s.set_logit_bias({});
  EXPECT_EQ(s.sample(logits), 1);
}

}  // namespace
}  // namespace channel
