// TokenIndex: token text -> id, an open-addressing hash table over the vocabulary
// (the merge loops look up every candidate pair, so this is the tokenizer's hot path).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace channel {

class TokenIndex {
 public:
  // Indexes texts[i] -> i; for duplicate texts the last id wins (as in llama.cpp).
  void build(const std::vector<std::string>& texts);
  // The id of `text` in the `texts` the index was built from, or -1.
  int32_t find(std::string_view text, const std::vector<std::string>& texts) const {
    const uint64_t h = hash(text);
    const auto tag = static_cast<uint32_t>(h >> 32);
    for (uint64_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.id < 0) return -1;
      if (s.tag == tag && texts[s.id] == text) return s.id;
    }
  }

  static uint64_t hash(std::string_view s) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (s.size() * 0xFF51AFD7ED558CCDull);
    size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) h = mix(h ^ load8(s.data() + i, 8));
    if (i < s.size()) h = mix(h ^ load8(s.data() + i, s.size() - i));
    h ^= h >> 29;
    h *= 0x94D049BB133111EBull;
    return h ^ (h >> 32);
  }

 private:
  struct Slot {
    uint32_t tag;  // high half of the hash, checked before the text
    int32_t id;    // -1 when empty
  };
  static uint64_t load8(const char* p, size_t n) {
    uint64_t v = 0;
    std::memcpy(&v, p, n);
    return v;
  }
  static uint64_t mix(uint64_t h) {
    h *= 0xBF58476D1CE4E5B9ull;
    return h ^ (h >> 31);
  }

  std::vector<Slot> slots_;  // [capacity], a power of two at least twice the vocabulary
  uint64_t mask_ = 0;
};

inline void TokenIndex::build(const std::vector<std::string>& texts) {
  uint64_t capacity = 16;
  while (capacity < 2 * texts.size()) capacity *= 2;
  slots_.assign(capacity, Slot{0, -1});
  mask_ = capacity - 1;
  for (size_t id = 0; id < texts.size(); ++id) {
    const uint64_t h = hash(texts[id]);
    const auto tag = static_cast<uint32_t>(h >> 32);
    for (uint64_t i = h & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.id < 0 || (s.tag == tag && texts[s.id] == texts[id])) {
        s = Slot{tag, static_cast<int32_t>(id)};
        break;
      }
    }
  }
}

}  // namespace channel
