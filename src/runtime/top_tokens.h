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

// The tokens that top-p then min-p keep of a whole row when top-k is off, in the order they
// leave those filters: what CandidateList::assign, apply_top_p(top_p) and apply_min_p(min_p)
// give, with the same bits. Only the tokens min-p keeps (logit >= max + log(min_p)) are listed
// and sorted; top-p's mass still counts the whole row (one exp a logit). `sorted` says whether
// top-p sorted them (top_p < 1), else they are in id order. False, leaving `out` alone, where
// min_p <= 0, the row has fewer than two logits or its largest is not finite: run the chain.
bool nucleus_tokens(std::span<const float> logits, float top_p, float min_p,
                    std::vector<TokenCandidate>& out, bool& sorted);

}  // namespace channel
