#include "memory/lexical_index.h"

#include <algorithm>
#include <cmath>

namespace channel {

void LexicalIndex::clear(uint32_t slot) {
  if (slot >= entries_.size() || !entries_[slot].valid) return;
  Entry& e = entries_[slot];
  for (int32_t t : e.tokens) {
    auto it = df_.find(t);
    if (it != df_.end() && --it->second == 0) df_.erase(it);
  }
  e = Entry{};
  --live_;
}

void LexicalIndex::set(uint32_t slot, uint64_t id, std::span<const int32_t> tokens) {
  if (slot >= entries_.size()) entries_.resize(size_t{slot} + 1);
  clear(slot);
  Entry& e = entries_[slot];
  e.tokens.assign(tokens.begin(), tokens.end());
  std::sort(e.tokens.begin(), e.tokens.end());
  e.tokens.erase(std::unique(e.tokens.begin(), e.tokens.end()), e.tokens.end());
  e.tokens.shrink_to_fit();
  for (int32_t t : e.tokens) ++df_[t];
  e.id = id;
  e.valid = true;
  ++live_;
}

std::vector<float> LexicalIndex::score(std::span<const int32_t> cue,
                                       std::span<const uint32_t> slots) const {
  std::vector<float> out(slots.size(), 0.0f);
  std::vector<int32_t> c(cue.begin(), cue.end());
  std::sort(c.begin(), c.end());
  c.erase(std::unique(c.begin(), c.end()), c.end());
  if (c.empty() || slots.empty()) return out;
  // df over the indexed episodes; N is the number scored, so that idf >= ln(1.5/N + 1) > 0
  const double n = static_cast<double>(std::max<size_t>(live_, 1));
  std::vector<double> idf(c.size());
  double total = 0.0;
  for (size_t i = 0; i < c.size(); ++i) {
    auto it = df_.find(c[i]);
    const double df = it == df_.end() ? 0.0 : static_cast<double>(it->second);
    idf[i] = std::log1p(std::max(0.0, n - df + 0.5) / (df + 0.5));
    total += idf[i];
  }
  if (total <= 0.0) return out;
  for (size_t s = 0; s < slots.size(); ++s) {
    const uint32_t slot = slots[s];
    if (slot >= entries_.size() || !entries_[slot].valid) continue;
    const std::vector<int32_t>& t = entries_[slot].tokens;
    // both sorted: a merge walk
    double sum = 0.0;
    size_t i = 0, j = 0;
    while (i < c.size() && j < t.size()) {
      if (c[i] < t[j]) {
        ++i;
      } else if (t[j] < c[i]) {
        ++j;
      } else {
        sum += idf[i];
        ++i;
        ++j;
      }
    }
    out[s] = static_cast<float>(sum / total);
  }
  return out;
}

}  // namespace channel
