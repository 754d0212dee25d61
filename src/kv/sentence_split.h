// Splitting generated text into response_sentence spans. The rule, applied at token
// boundaries so a span never cuts a token:
//   a piece with visible (non-whitespace) text starts a new sentence when whitespace
//   separates it from the text before (trailing whitespace of earlier pieces, or its own
//   leading whitespace) and either that whitespace holds a newline, or the text before it
//   ends with '.', '!', '?', "..." or U+2026 (optionally followed by closing quotes or
//   brackets) and the word before a '.' is not a common abbreviation (Mr. Dr. e.g. ...).
//   Whitespace-only pieces never start a sentence: they stay with the one they follow.
// "3.14" and "example.com" never split (no whitespace after the dot).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace channel {

class SentenceSplitter {
 public:
  // Feeds the next generated piece; true when it begins a new sentence (the caller then
  // begins a new response_sentence span before appending its token). The first piece
  // with visible text after construction or reset() returns true.
  bool feed(std::string_view piece);
  void reset();

  // What the splitter remembers of the text so far (session files save it).
  struct State {
    std::string tail;   // [<= kTailBytes] the last bytes fed
    bool fresh = true;  // no visible text fed since construction or reset()
    bool operator==(const State&) const = default;
  };
  static constexpr size_t kTailBytes = 32;
  State state() const { return {tail_, fresh_}; }
  // Throws channel::Error for a tail longer than kTailBytes.
  void restore(const State& state);

 private:
  std::string tail_;  // last bytes fed, enough to judge the terminator
  bool fresh_ = true;
};

// The whole-text form of the same rule over pieces: returns, for each piece, whether it
// begins a sentence. Splitting text into pieces byte by byte gives the character-level rule.
std::vector<bool> sentence_starts(const std::vector<std::string_view>& pieces);

}  // namespace channel
