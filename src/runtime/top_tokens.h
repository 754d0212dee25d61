// The best tokens of a logits row without sorting the vocabulary: Gemma's 262,144 logits are a
// megabyte, and a CUDA step of a 1B model takes about a millisecond, so the sampler's scan
// must cost tens of microseconds, not hundreds (a scalar argmax took ~300 us, building and
// partially sorting the whole candidate list ~800 us on the development machine).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "runtime/sampler.h"

namespace channel {

// The index of the largest logit, the lowest on a tie; NaN is never chosen; 0 when no logit
// is above -inf (or the row is empty).
size_t argmax_logit(std::span<const float> logits);

// The k best candidates by (logit descending, id ascending), NaN taken as -inf, in that order:
// what CandidateList::assign then apply_top_k give, for k >= 1. Fills `out` (p = 0).
void top_k_tokens(std::span<const float> logits, size_t k, std::vector<TokenCandidate>& out);

// OpenAI's logprobs of one step: the chosen token's log-probability under the softmax of the
// whole row (NaN taken as -inf), and the top_n most likely tokens' (logit descending, id
// ascending). A row with no finite maximum gives -inf everywhere.
struct StepLogprobs {
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top;  // (token, log-probability)
};
StepLogprobs step_logprobs(std::span<const float> logits, int32_t token, size_t top_n);

// The tokens that top-p then min-p keep of a whole row when top-k is off, in the order they
// leave those filters: what CandidateList::assign, apply_top_p(top_p) and apply_min_p(min_p)
// give, with the same bits. Only the tokens min-p keeps (logit >= max + log(min_p)) are listed
// and sorted; top-p's mass still counts the whole row (one exp a logit). `sorted` says whether
// top-p sorted them (top_p < 1), else they are in id order. False, leaving `out` alone, where
// min_p <= 0, the row has fewer than two logits or its largest is not finite: run the chain.
bool nucleus_tokens(std::span<const float> logits, float top_p, float min_p,
                    std::vector<TokenCandidate>& out, bool& sorted);

}  // namespace channel
