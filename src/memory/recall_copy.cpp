#include "memory/recall_copy.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace channel {

size_t recall_copy_edits(size_t n_vocab, std::span<const int32_t> context,
                         std::span<const std::span<const int32_t>> sources,
                         const RecallCopyConfig& config, std::vector<LogitEdit>& edits) {
  if (config.bias == 0.0f || context.empty() || config.min_match == 0) return 0;
  const size_t cap = std::min(config.max_match, context.size());
  size_t best = 0;
  std::vector<int32_t> next;  // continuations of the longest match so far
  for (std::span<const int32_t> src : sources) {
    // Position j ends a candidate run (src[j] == the newest context token); src[j + 1] follows.
    for (size_t j = 0; j + 1 < src.size(); ++j) {
      size_t n = 0;
      while (n < cap && n <= j && src[j - n] == context[context.size() - 1 - n]) ++n;
      if (n < config.min_match || n < best) continue;
      if (n > best) {
        best = n;
        next.clear();
      }
      next.push_back(src[j + 1]);
    }
  }
  if (best == 0) return 0;
  std::sort(next.begin(), next.end());
  next.erase(std::unique(next.begin(), next.end()), next.end());
  // A longer run is stronger evidence of a verbatim recollection: each doubling of the run
  // adds `bias` once more (2 tokens: bias, 4: 2 bias), up to max_bonus_run.
  const size_t run = std::max<size_t>(2, std::min(best, config.max_bonus_run));
  const float bonus = config.bias * std::log2(static_cast<float>(run));
  for (int32_t t : next)
    if (t >= 0 && static_cast<size_t>(t) < n_vocab) edits.push_back({t, bonus});
  return best;
}

size_t apply_recall_copy(std::span<float> logits, std::span<const int32_t> context,
                         std::span<const std::span<const int32_t>> sources,
                         const RecallCopyConfig& config) {
  std::vector<LogitEdit> edits;
  const size_t best = recall_copy_edits(logits.size(), context, sources, config, edits);
  for (const LogitEdit& e : edits) logits[static_cast<size_t>(e.id)] += e.delta;
  return best;
}

}  // namespace channel
