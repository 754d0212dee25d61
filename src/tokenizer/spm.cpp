// SentencePiece-style encoding: start from single UTF-8 characters and keep merging
// the adjacent pair whose concatenation is the highest-scoring token; whatever is
// not a token at the end falls back to byte tokens.
#include <algorithm>

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace channel {

namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581

struct SpmSymbol {
  int32_t prev, next;   // neighbours in the linked list, -1 at the ends of a chunk
  uint32_t start, len;  // byte range in the text; len 0 once merged into the left one
};

struct SpmPair {
  float score;
  int32_t left, right;
  uint32_t len;  // left.len + right.len when queued: detects pairs that went stale
};

// Highest score first; among equal scores the leftmost pair.
struct SpmPairWorse {
  bool operator()(const SpmPair& a, const SpmPair& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

void Tokenizer::Impl::encode_spm(std::string_view text, std::vector<int32_t>& out) const {
  // Split into characters, and note where a new chunk may start: at a U+2581 that no
  // token can join to what precedes it (see joins_space).
  std::vector<SpmSymbol> syms;      // [n_chars]
  std::vector<int32_t> chunk_ends;  // [n_chunks] one past each chunk's last symbol
  syms.reserve(text.size());
  for (size_t off = 0; off < text.size();) {
    const size_t len =
        std::min(unicode::utf8_sequence_length(static_cast<uint8_t>(text[off])), text.size() - off);
    const auto i = static_cast<int32_t>(syms.size());
    if (off > 0 && text.substr(off, 3) == kSpaceMarker &&
        !(off >= 3 && text.substr(off - 3, 3) == kSpaceMarker) &&
        !joins_space[static_cast<uint8_t>(text[off - 1])]) {
      chunk_ends.push_back(i);
    }
    syms.push_back({i - 1, i + 1, static_cast<uint32_t>(off), static_cast<uint32_t>(len)});
    off += len;
  }
  if (syms.empty()) return;
  chunk_ends.push_back(static_cast<int32_t>(syms.size()));

  std::vector<SpmPair> heap;  // binary heap ordered by SpmPairWorse
  const auto try_pair = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const std::string_view joined = text.substr(syms[left].start, syms[left].len + syms[right].len);
    const int32_t id = find(joined);
    if (id == kNoToken) return;
    heap.push_back({scores[id], left, right, static_cast<uint32_t>(joined.size())});
    std::push_heap(heap.begin(), heap.end(), SpmPairWorse{});
  };

  int32_t begin = 0;
  for (const int32_t end : chunk_ends) {
    syms[begin].prev = -1;
    syms[end - 1].next = -1;
    heap.clear();
    for (int32_t i = begin + 1; i < end; ++i) try_pair(i - 1, i);
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), SpmPairWorse{});
      const SpmPair p = heap.back();
      heap.pop_back();
      SpmSymbol& left = syms[p.left];
      SpmSymbol& right = syms[p.right];
      if (left.len == 0 || right.len == 0 || left.len + right.len != p.len) continue;
      left.len += right.len;
      right.len = 0;
      left.next = right.next;
      if (right.next >= 0) syms[right.next].prev = p.left;
      try_pair(left.prev, p.left);
      try_pair(p.left, left.next);
    }
    for (int32_t i = begin; i != -1; i = syms[i].next) {
      const std::string_view piece = text.substr(syms[i].start, syms[i].len);
      const int32_t id = find(piece);
      if (id != kNoToken) {
        out.push_back(id);
        continue;
      }
      for (char c : piece) {  // byte fallback
        const int32_t b = byte_tokens[static_cast<uint8_t>(c)];
        if (b != kNoToken) out.push_back(b);
      }
    }
    begin = end;
  }
}

}  // namespace channel
