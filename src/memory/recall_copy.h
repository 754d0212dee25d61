// Recall copy: what was recalled into tier 3 as evidence for the next token.
//
// A small model that reads a recalled episode knows which value to give but may lose a long
// name piece by piece ("Marr" + "ays" + "h" for Marrakesh, whose episode reads "Marr" + "akes"
// + "h"). When the newest tokens of the context repeat a run of a recalled episode, the token
// that followed that run in the episode gets a bonus added to its logit, as retrieval LMs mix
// a datastore's next-token evidence into the model's distribution (kNN-LM, the infini-gram
// "longest suffix" match). A bonus in logit space keeps the model in charge: a continuation it
// already finds plausible wins over a near miss, one it rules out stays ruled out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "runtime/sampler.h"

namespace channel {

struct RecallCopyConfig {
  // Added to the logit of each continuation of the longest match (a factor e^bias on its
  // probability before normalisation). 0: off.
  float bias = 3.0f;
  // The shortest run of context tokens that counts as a match: one shared token (" the") is
  // no evidence of recollection; two in a row are.
  size_t min_match = 2;
  size_t max_match = 32;  // longer runs are not compared further
  // The bonus grows with the run up to this length and no further (2 bias at 4 tokens): a
  // long verbatim run still leaves the model free to stop or turn away when it is sure.
  size_t max_bonus_run = 4;
};
inline constexpr float kDefaultRecallCopyBias = 3.0f;

// Finds the longest suffix of `context` (at least config.min_match tokens) that occurs in one
// of `sources` followed by a token, and adds bias * log2(min(run, max_bonus_run)) to the logit
// of every distinct token that follows one of its occurrences. Tokens outside [0, logits.size()) are ignored. Returns
// the length of the match (0: none, nothing changed).
size_t apply_recall_copy(std::span<float> logits, std::span<const int32_t> context,
                         std::span<const std::span<const int32_t>> sources,
                         const RecallCopyConfig& config);
// The same bonus as edits (a sampler's logit bias): appends one per distinct continuation in
// [0, n_vocab) and returns the length of the match (0: none appended).
size_t recall_copy_edits(size_t n_vocab, std::span<const int32_t> context,
                         std::span<const std::span<const int32_t>> sources,
                         const RecallCopyConfig& config, std::vector<LogitEdit>& edits);

}  // namespace channel
