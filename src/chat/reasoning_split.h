// A reply's reasoning, as thinking models (Qwen3, DeepSeek-R1 and their distills) write it: a
// <think> ... </think> block at the start of the reply, before the answer. The split is the
// reply's own: a reply that does not begin with <think> (after blanks) has no reasoning.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace channel {

// The blanks trim_whitespace removes.
bool is_blank(char c);
// The length of the longest end of `s` that begins `tag` (a tag that may still be arriving).
size_t partial_tag_at_end(std::string_view s, std::string_view tag);

struct SplitReply {
  std::string reasoning;  // the block's text, trimmed ("" when none)
  std::string content;    // the rest (trimmed by the caller as before)
};

// A whole reply. An unclosed block (a reply cut inside its reasoning) is all reasoning.
SplitReply split_reasoning(std::string_view reply);

// The same split, piece by piece as a reply streams: each piece of text comes back tagged
// reasoning or content, with a tag's partial text held until it is known ("<thi" could start
// <think>), so the block's tags are never in a piece and the pieces add up to
// split_reasoning's parts (less the blanks around the block).
class ReasoningStream {
 public:
  struct Piece {
    bool reasoning = false;
    std::string text;
  };
  std::vector<Piece> push(std::string_view text);
  // What is still held at the reply's end.
  std::vector<Piece> finish();

 private:
  enum class State { start, reasoning, content };
  State state_ = State::start;
  std::string held_;
};

}  // namespace channel
