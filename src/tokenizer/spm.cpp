// SentencePiece-style encoding: start from single UTF-8 characters and keep merging
// the adjacent pair whose concatenation is the highest-scoring token; whatever is
// not a token at the end falls back to byte tokens.
#include <queue>

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace channel {

namespace {

struct SpmSymbol {
  int32_t prev, next;   // neighbours in the linked list, -1 at the ends
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
  std::vector<SpmSymbol> syms;  // [n_chars]
  syms.reserve(text.size());
  for (size_t off = 0; off < text.size();) {
    const size_t len =
        std::min(unicode::utf8_sequence_length(static_cast<uint8_t>(text[off])), text.size() - off);
    const auto i = static_cast<int32_t>(syms.size());
    syms.push_back({i - 1, off + len == text.size() ? -1 : i + 1, static_cast<uint32_t>(off),
                    static_cast<uint32_t>(len)});
    off += len;
  }
  if (syms.empty()) return;

  std::priority_queue<SpmPair, std::vector<SpmPair>, SpmPairWorse> queue;
  const auto try_pair = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const std::string_view joined = text.substr(syms[left].start, syms[left].len + syms[right].len);
    const int32_t id = find(joined);
    if (id == kNoToken) return;
    queue.push({scores[id], left, right, static_cast<uint32_t>(joined.size())});
  };
  for (size_t i = 1; i < syms.size(); ++i)
    try_pair(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));

  while (!queue.empty()) {
    const SpmPair p = queue.top();
    queue.pop();
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

  for (int32_t i = 0; i != -1; i = syms[i].next) {
    const std::string_view piece = text.substr(syms[i].start, syms[i].len);
    const int32_t id = find(piece);
    if (id != kNoToken) {
      out.push_back(id);
      continue;
    }
    for (char c : piece) {
      const int32_t b = byte_tokens[static_cast<uint8_t>(c)];
      if (b != kNoToken) out.push_back(b);
    }
  }
}

}  // namespace channel
