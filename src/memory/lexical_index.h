// lexical_index.h: the sparse half of hybrid recall. Each live episode's distinct tokens are
// kept in memory (at most max_tokens per episode, so the index is bounded by the store's
// capacity), with a document frequency per token. A cue's tokens score an episode by the
// inverse document frequency of the cue tokens it contains, as BM25 does without length
// normalisation (episodes are all about the same length): names, codes and rare words that
// a question shares with the episode that stated them weigh much, "the" and "is" nothing.
// Dense retrieval (the model's own vectors) finds what a cue means; this finds what it names.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace channel {

class LexicalIndex {
 public:
  explicit LexicalIndex(size_t slots = 0) : entries_(slots) {}

  // True when `slot` holds the tokens of episode `id` already.
  bool current(uint32_t slot, uint64_t id) const {
    return slot < entries_.size() && entries_[slot].valid && entries_[slot].id == id;
  }
  // Replaces what `slot` held by the distinct tokens of episode `id`.
  void set(uint32_t slot, uint64_t id, std::span<const int32_t> tokens);
  // Forgets `slot` (an episode removed or replaced by one not indexed yet).
  void clear(uint32_t slot);

  // Per slot of `slots`, sum of idf(t) over the distinct cue tokens t the episode contains,
  // divided by the sum over every distinct cue token: 0 (nothing shared) .. 1 (all shared).
  // idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5)), N and df over the indexed episodes. Slots
  // not indexed score 0.
  std::vector<float> score(std::span<const int32_t> cue, std::span<const uint32_t> slots) const;

  size_t episodes() const { return live_; }

 private:
  struct Entry {
    uint64_t id = 0;
    bool valid = false;
    std::vector<int32_t> tokens;  // sorted, distinct
  };
  std::vector<Entry> entries_;
  std::unordered_map<int32_t, uint32_t> df_;  // token -> live episodes holding it
  size_t live_ = 0;
};

}  // namespace channel
