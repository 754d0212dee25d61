// The best tokens of a logits row without sorting the vocabulary: Gemma's 262,144 logits are a
// megabyte, and a CUDA step of a 1B model takes about a millisecond, so the sampler's scan
// must cost tens of microseconds, not hundreds (a scalar argmax took ~300 us, building and
// partially sorting the whole candidate list ~800 us on the development machine).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "runtime/sampler.h"

namespace channel {

// The index of the largest logit, the lowest on a tie; NaN is never chosen; 0 when no logit
// is above -inf (or the row is empty).
size_t argmax_logit(std::span<const float> logits);

// The k best candidates by (logit descending, id ascending), NaN taken as -inf, in that order:
// what CandidateList::assign then apply_top_k give, for k >= 1. Fills `out` (p = 0).
void top_k_tokens(std::span<const float> logits, size_t k, std::vector<TokenCandidate>& out);

}  // namespace channel
