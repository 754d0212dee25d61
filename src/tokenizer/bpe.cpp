// Byte-level BPE encoding: pre-tokenize into words, map each byte to its GPT-2
// stand-in code point, then apply the lowest-ranked merge among adjacent symbols
// until none applies.
#include <algorithm>

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace channel {

namespace {

struct BpeSymbol {
  int32_t prev, next;   // neighbours in the linked list, -1 at the ends
  uint32_t start, len;  // byte range in the word; len 0 once merged into the left one
  int32_t id;           // token of the symbol's text, or kNoToken
};

struct BpePair {
  int32_t rank;
  int32_t left, right;
  uint32_t len;  // left.len + right.len when queued: detects pairs that went stale
};

// Lowest rank first; among equal ranks the leftmost pair.
struct BpePairWorse {
  bool operator()(const BpePair& a, const BpePair& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

// Reused across the words of one encode call.
struct BpeScratch {
  std::vector<BpeSymbol> syms;  // [n_chars of the word]
  std::vector<BpePair> heap;    // queue storage
};

void encode_word(const Tokenizer::Impl& v, std::string_view word, BpeScratch& s,
                 std::vector<int32_t>& out) {
  if (v.ignore_merges) {
    if (const int32_t id = v.find(word); id != kNoToken) {
      out.push_back(id);
      return;
    }
  }
  auto& syms = s.syms;
  syms.clear();
  for (size_t off = 0; off < word.size();) {
    const size_t len =
        std::min(unicode::utf8_sequence_length(static_cast<uint8_t>(word[off])), word.size() - off);
    const auto i = static_cast<int32_t>(syms.size());
    syms.push_back({i - 1, off + len == word.size() ? -1 : i + 1, static_cast<uint32_t>(off),
                    static_cast<uint32_t>(len), v.find(word.substr(off, len))});
    off += len;
  }
  if (syms.empty()) return;

  auto& heap = s.heap;  // binary heap ordered by BpePairWorse
  heap.clear();
  const auto text_of = [&](const BpeSymbol& sym) { return word.substr(sym.start, sym.len); };
  const auto try_pair = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const int32_t rank =
        v.merge_rank(syms[left].id, text_of(syms[left]), syms[right].id, text_of(syms[right]));
    if (rank < 0) return;
    heap.push_back({rank, left, right, syms[left].len + syms[right].len});
    std::push_heap(heap.begin(), heap.end(), BpePairWorse{});
  };
  for (size_t i = 1; i < syms.size(); ++i)
    try_pair(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), BpePairWorse{});
    const BpePair p = heap.back();
    heap.pop_back();
    BpeSymbol& left = syms[p.left];
    BpeSymbol& right = syms[p.right];
    if (left.len == 0 || right.len == 0 || left.len + right.len != p.len) continue;
    left.len += right.len;
    left.id = v.find(text_of(left));
    right.len = 0;
    left.next = right.next;
    if (right.next >= 0) syms[right.next].prev = p.left;
    try_pair(left.prev, p.left);
    try_pair(p.left, left.next);
  }

  for (int32_t i = 0; i != -1; i = syms[i].next) {
    if (syms[i].id != kNoToken) {
      out.push_back(syms[i].id);
      continue;
    }
    // Not a token: llama.cpp tries each byte of the symbol's text as a token.
    for (char c : text_of(syms[i])) {
      if (const int32_t id = v.find(std::string_view(&c, 1)); id != kNoToken) out.push_back(id);
    }
  }
}

}  // namespace

int32_t Tokenizer::Impl::merge_rank(int32_t left_id, std::string_view left, int32_t right_id,
                                    std::string_view right) const {
  if (left_id != kNoToken && right_id != kNoToken) {
    const auto it =
        merge_ranks.find((static_cast<uint64_t>(left_id) << 32) | static_cast<uint32_t>(right_id));
    return it == merge_ranks.end() ? -1 : it->second;
  }
  if (text_merge_ranks.empty()) return -1;
  const auto it = text_merge_ranks.find(std::to_string(left.size()) + ":" + std::string(left) +
                                        std::string(right));
  return it == text_merge_ranks.end() ? -1 : it->second;
}

void Tokenizer::Impl::encode_bpe(std::string_view text, std::vector<int32_t>& out) const {
  // Invalid UTF-8 becomes U+FFFD here, as in llama.cpp's pre-tokenizer.
  const std::vector<uint32_t> cpts = unicode::decode_utf8(text);  // [n_cpts]
  BpeScratch scratch;
  std::string utf8, word;
  size_t begin = 0;
  for (size_t len : pre_tokenize(pre, cpts)) {
    word.clear();
    for (size_t i = begin; i < begin + len; ++i) {
      utf8.clear();
      unicode::append_utf8(utf8, cpts[i]);
      for (char c : utf8)
        unicode::append_utf8(word, unicode::byte_to_codepoint(static_cast<uint8_t>(c)));
    }
    begin += len;
    encode_word(*this, word, scratch, out);
  }
}

}  // namespace channel
