#include "runtime/top_tokens.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>
#include <vector>

#include "runtime/sampler.h"

namespace channel {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// A row with many ties (values on a coarse grid), and NaN, -inf and +inf sprinkled in as asked.
std::vector<float> row(size_t n, uint64_t seed, double grid, bool specials) {
  Rng r(seed);
  std::vector<float> x(n);
  for (auto& v : x)
    v = static_cast<float>(std::round((r.next_double() * 20.0 - 10.0) / grid) * grid);
  if (specials && n > 0)
    for (size_t i = 0; i < n / 50 + 1; ++i) {
      const size_t at = r.next_u64() % n;
      const uint64_t kind = r.next_u64() % 4;
      x[at] = kind == 0 ? std::nanf("") : kind == 1 ? -kInf : kind == 2 ? 9.5f : x[at];
    }
  return x;
}

size_t scalar_argmax(const std::vector<float>& x) {
  size_t best = 0;
  float value = -kInf;
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i] > value) {
      value = x[i];
      best = i;
    }
  return best;
}

const size_t kSizes[] = {0, 1, 2, 15, 16, 17, 63, 64, 65, 1000, 4099, 262144 + 7};

TEST(TopTokens, ArgmaxIsTheScalarScan) {
  for (const size_t n : kSizes)
    for (const double grid : {1e-6, 0.5, 4.0})
      for (const bool specials : {false, true}) {
        const std::vector<float> x = row(n, n * 7 + 1, grid, specials);
        EXPECT_EQ(argmax_logit(x), scalar_argmax(x)) << n << " grid " << grid;
      }
  // Nothing above -inf: 0, as the scalar scan; a lone +inf or a maximum at the very end wins.
  EXPECT_EQ(argmax_logit(std::vector<float>(40, std::nanf(""))), 0u);
  EXPECT_EQ(argmax_logit(std::vector<float>(40, -kInf)), 0u);
  std::vector<float> x(100, 1.0f);
  x[99] = 2.0f;
  EXPECT_EQ(argmax_logit(x), 99u);
  x[37] = kInf;
  EXPECT_EQ(argmax_logit(x), 37u);
  std::vector<float> ties(48, 3.0f);  // the same maximum in every lane: the lowest id
  ties[0] = 0.0f;
  EXPECT_EQ(argmax_logit(ties), 1u);
}

TEST(TopTokens, TopKIsTheSortedListsHead) {
  std::vector<TokenCandidate> got;
  for (const size_t n : kSizes)
    for (const size_t k :
         {size_t{1}, size_t{2}, size_t{40}, size_t{65}, n > 0 ? n - 1 : 0, n, n + 5})
      for (const double grid : {1e-6, 0.5, 4.0})
        for (const bool specials : {false, true}) {
          if (k == 0) continue;
          const std::vector<float> x = row(n, n * 13 + k, grid, specials);
          CandidateList want;
          want.assign(x);
          apply_top_k(want, static_cast<int32_t>(k));
          top_k_tokens(x, k, got);
          ASSERT_EQ(got.size(), want.items.size()) << n << " k " << k;
          for (size_t i = 0; i < got.size(); ++i) {
            ASSERT_EQ(got[i].id, want.items[i].id) << n << " k " << k << " at " << i;
            ASSERT_EQ(std::memcmp(&got[i].logit, &want.items[i].logit, 4), 0) << n << " at " << i;
          }
        }
}

// Top-p then min-p of a whole row (top-k off) without its list: the chain's tokens, order and
// logits, on peaked and flat rows, ties, NaN and -inf; declined where min-p is off or the row
// has no finite maximum.
TEST(TopTokens, NucleusIsTheChainsList) {
  std::vector<TokenCandidate> got;
  bool sorted = false;
  for (const size_t n : kSizes)
    for (const float top_p : {0.0f, 0.3f, 0.9f, 0.95f, 0.999999f, 1.0f})
      for (const float min_p : {0.001f, 0.05f, 0.5f, 1.0f})
        for (const double grid : {1e-6, 0.5, 4.0})
          for (const bool specials : {false, true}) {
            // The vocabulary-sized row: the deep and the peaked cases only (each chain run
            // sorts much of it).
            if (n > 5000 && (top_p < 0.9f || top_p == 1.0f || min_p > 0.05f)) continue;
            std::vector<float> x = row(n, n * 17 + 3, grid, specials);
            if (n > 100 && grid == 0.5) x[n / 3] = 40.0f;  // one logit holds nearly all the mass
            const bool ran = nucleus_tokens(x, top_p, min_p, got, sorted);
            if (n < 2) {
              EXPECT_FALSE(ran);
              continue;
            }
            ASSERT_TRUE(ran) << n;
            CandidateList want;
            want.assign(x);
            apply_top_p(want, top_p);
            apply_min_p(want, min_p);
            ASSERT_EQ(got.size(), want.items.size()) << n << " p " << top_p << " min-p " << min_p;
            for (size_t i = 0; i < got.size(); ++i) {
              ASSERT_EQ(got[i].id, want.items[i].id) << n << " p " << top_p << " at " << i;
              ASSERT_EQ(std::memcmp(&got[i].logit, &want.items[i].logit, 4), 0) << n << " at " << i;
            }
            EXPECT_EQ(sorted, top_p < 1.0f);
          }
  std::vector<float> x(100, 0.5f);
  EXPECT_FALSE(nucleus_tokens(x, 0.9f, 0.0f, got, sorted));  // min-p off
  x.assign(100, -kInf);
  EXPECT_FALSE(nucleus_tokens(x, 0.9f, 0.05f, got, sorted));
  x.assign(100, std::nanf(""));
  EXPECT_FALSE(nucleus_tokens(x, 0.9f, 0.05f, got, sorted));
  x.assign(100, 0.5f);
  x[7] = kInf;
  EXPECT_FALSE(nucleus_tokens(x, 0.9f, 0.05f, got, sorted));
}

// Log-probabilities of the whole row's softmax: they sum to one, the top ones are the
// likeliest in the chain's order, NaN and ids outside the row are -inf.
TEST(TopTokens, StepLogprobsAreTheRowsLogSoftmax) {
  auto near = [](double got, double want) {  // -inf (a -inf or NaN logit) exactly
    return std::isinf(want) ? got == want : std::abs(got - want) < 1e-5;
  };
  for (const size_t n : {size_t{2}, size_t{17}, size_t{4099}})
    for (const bool specials : {false, true}) {
      const std::vector<float> x = row(n, n + 9, 0.25, specials);
      const StepLogprobs lp = step_logprobs(x, 1, 5);
      double total = 0.0, max_logit = -kInf;
      for (const float v : x)
        max_logit = std::isnan(v) ? max_logit : std::max<double>(max_logit, v);
      for (const float v : x)
        if (!std::isnan(v)) total += std::exp(static_cast<double>(v) - max_logit);
      const double lse = max_logit + std::log(total);
      const float want = std::isnan(x[1]) ? -kInf : static_cast<float>(x[1] - lse);
      EXPECT_TRUE(near(lp.logprob, want)) << n << ": " << lp.logprob << " against " << want;
      std::vector<TokenCandidate> top;
      top_k_tokens(x, 5, top);
      ASSERT_EQ(lp.top.size(), top.size());
      double mass = 0.0;
      for (size_t i = 0; i < top.size(); ++i) {
        EXPECT_EQ(lp.top[i].first, top[i].id);
        EXPECT_TRUE(near(lp.top[i].second, top[i].logit - lse)) << n << " top " << i;
        mass += std::exp(static_cast<double>(lp.top[i].second));
      }
      EXPECT_LE(mass, 1.0 + 1e-6);
      if (n == 2 && !specials) {
        EXPECT_NEAR(mass, 1.0, 1e-6);  // the whole row
      }
    }
  const std::vector<float> x = {0.0f, std::nanf(""), 1.0f};
  EXPECT_EQ(step_logprobs(x, 1, 0).logprob, -kInf);
  EXPECT_EQ(step_logprobs(x, 3, 0).logprob, -kInf);
  EXPECT_TRUE(step_logprobs(x, 0, 0).top.empty());
  EXPECT_NEAR(step_logprobs(x, 2, 0).logprob, -std::log1p(std::exp(-1.0)), 1e-6);
  const std::vector<float> none(4, -kInf);
  EXPECT_EQ(step_logprobs(none, 0, 2).logprob, -kInf);
}

// The sampler's top-k path against the chain run filter by filter with the same RNG: the
// same tokens, step after step, penalty on and off.
TEST(TopTokens, SamplerGivesTheChainsTokens) {
  for (const float penalty : {1.0f, 1.3f})
    // {top-k, top-p, min-p}: top-k's selection; top-k off (nucleus_tokens), with top-p or
    // min-p alone too; top-k past the row.
    for (const auto& [top_k, top_p, min_p] :
         {std::tuple{1, 0.95f, 0.05f}, std::tuple{40, 0.95f, 0.05f}, std::tuple{700, 0.95f, 0.05f},
          std::tuple{0, 0.95f, 0.05f}, std::tuple{0, 0.5f, 0.01f}, std::tuple{0, 1.0f, 0.05f},
          std::tuple{0, 0.9f, 0.0f}, std::tuple{5000, 0.9f, 0.05f}}) {
      SamplerConfig cfg;
      cfg.temperature = 0.9f;
      cfg.top_k = top_k;
      cfg.top_p = top_p;
      cfg.min_p = min_p;
      cfg.repeat_penalty = penalty;
      cfg.repeat_last_n = 16;
      cfg.seed = 99;
      Sampler fast(cfg);
      Rng rng(cfg.seed);
      std::vector<int32_t> recent;
      for (int step = 0; step < 200; ++step) {
        const std::vector<float> x =
            row(3000, static_cast<uint64_t>(step) + 5, 0.25, step % 3 == 0);
        CandidateList c;
        c.assign(x);
        apply_repeat_penalty(c, fast.recent_tokens(), cfg.repeat_penalty);
        apply_top_k(c, cfg.top_k);
        apply_top_p(c, cfg.top_p);
        apply_min_p(c, cfg.min_p);
        apply_temperature(c, cfg.temperature);
        const int32_t want = draw(c, rng);
        const int32_t got = fast.sample(x);
        ASSERT_EQ(got, want) << "penalty " << penalty << " top-k " << top_k << " top-p " << top_p
                             << " min-p " << min_p << " step " << step;
        fast.accept(got);
      }
    }
}

}  // namespace
}  // namespace channel
