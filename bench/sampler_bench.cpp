// One sampling step over Gemma's 262,144 logits: the sampler (argmax for greedy, the top-k
// selection otherwise) against the baseline it replaced in the same run, the whole vocabulary
// as a candidate list then partially sorted (CandidateList::assign + apply_top_k) and a scalar
// argmax, and a logit bias that asks for nothing against copying the row first. Compare the
// pairs' times: the ratio is what a decode step saves on the host. With top-k off, the sampler
// against the whole list sorted, then top-p and min-p (what the chain did where its first 256
// entries did not hold the mass).
#include <algorithm>
#include <limits>
#include <vector>

#include <benchmark/benchmark.h>

#include "runtime/sampler.h"
#include "runtime/top_tokens.h"

namespace {

using namespace channel;

constexpr size_t kVocab = 262144;

// Logits shaped like a model's: most near zero, a few dozen well above.
const std::vector<float>& logits() {
  static const std::vector<float> x = [] {
    std::vector<float> v(kVocab);
    Rng r(3);
    for (auto& l : v) l = static_cast<float>(r.next_double() * 4.0 - 2.0);
    for (int i = 0; i < 64; ++i)
      v[r.next_u64() % kVocab] = static_cast<float>(8.0 + r.next_double() * 4.0);
    return v;
  }();
  return x;
}

void BM_TopK40_SortedList(benchmark::State& state) {
  CandidateList c;
  for (auto _ : state) {
    c.assign(logits());
    apply_top_k(c, 40);
    benchmark::DoNotOptimize(c.items.data());
  }
}

void BM_TopK40_Selection(benchmark::State& state) {
  std::vector<TokenCandidate> out;
  for (auto _ : state) {
    top_k_tokens(logits(), 40, out);
    benchmark::DoNotOptimize(out.data());
  }
}

void BM_Argmax_Scalar(benchmark::State& state) {
  const std::vector<float>& x = logits();
  for (auto _ : state) {
    size_t best = 0;
    float value = -std::numeric_limits<float>::infinity();
    for (size_t i = 0; i < x.size(); ++i)
      if (x[i] > value) {
        value = x[i];
        best = i;
      }
    benchmark::DoNotOptimize(best);
  }
}

void BM_Argmax_Lanes(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(argmax_logit(logits()));
}

// The default chain (penalty off, top-k 40, top-p 0.95, min-p 0.05, temperature 0.8).
void BM_SampleDefault(benchmark::State& state) {
  Sampler s{SamplerConfig{}};
  for (auto _ : state) benchmark::DoNotOptimize(s.sample(logits()));
}

// An attached store's recall-copy bias on a step where no recalled run matches (most steps):
// the sampler copies nothing now; before, it copied the logits for every bias call (the copy
// is the baseline here).
void BM_SampleDefault_IdleBias(benchmark::State& state) {
  Sampler s{SamplerConfig{}};
  s.set_logit_bias([](size_t, std::vector<LogitEdit>&) {});
  for (auto _ : state) benchmark::DoNotOptimize(s.sample(logits()));
}

void BM_SampleDefault_CopyFirst(benchmark::State& state) {
  Sampler s{SamplerConfig{}};
  std::vector<float> copy;
  for (auto _ : state) {
    copy.assign(logits().begin(), logits().end());
    benchmark::DoNotOptimize(s.sample(copy));
  }
}

// top-k off, top-p 0.95 and min-p 0.05 (what `--top-k 0` leaves): on these logits the 64
// high ones hold about three quarters of the mass, so top-p's prefix runs deep into the rest.
void BM_SampleTopP_NoTopK(benchmark::State& state) {
  SamplerConfig config;
  config.top_k = 0;
  Sampler s{config};
  for (auto _ : state) benchmark::DoNotOptimize(s.sample(logits()));
}

// The baseline: the whole vocabulary's list, sorted, top-p's prefix, min-p.
void BM_TopP_SortedList(benchmark::State& state) {
  CandidateList c;
  for (auto _ : state) {
    c.assign(logits());
    std::sort(c.items.begin(), c.items.end(), ranks_before);
    c.sorted = true;
    apply_top_p(c, 0.95f);
    apply_min_p(c, 0.05f);
    benchmark::DoNotOptimize(c.items.data());
  }
}

// The same chain with a peaked row (one logit far above the rest): top-p stops at once.
void BM_SampleTopP_NoTopK_Peaked(benchmark::State& state) {
  SamplerConfig config;
  config.top_k = 0;
  Sampler s{config};
  std::vector<float> x = logits();
  x[12345] = 40.0f;
  for (auto _ : state) benchmark::DoNotOptimize(s.sample(x));
}

// OpenAI logprobs of one step (the whole row's log-softmax, 5 alternatives), against the
// default sampling step above: what asking for them adds to a token.
void BM_StepLogprobs(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(step_logprobs(logits(), 7, 5).logprob);
}

BENCHMARK(BM_TopK40_SortedList);
BENCHMARK(BM_TopK40_Selection);
BENCHMARK(BM_Argmax_Scalar);
BENCHMARK(BM_Argmax_Lanes);
BENCHMARK(BM_SampleDefault);
BENCHMARK(BM_SampleDefault_IdleBias);
BENCHMARK(BM_SampleDefault_CopyFirst);
BENCHMARK(BM_TopP_SortedList);
BENCHMARK(BM_SampleTopP_NoTopK);
BENCHMARK(BM_SampleTopP_NoTopK_Peaked);
BENCHMARK(BM_StepLogprobs);

}  // namespace
