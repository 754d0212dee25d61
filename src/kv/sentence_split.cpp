// SentenceSplitter: sentence ends at token boundaries (rule in the header).
#include "kv/sentence_split.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "util/error.h"

namespace channel {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

bool is_closer(char c) {
  return c == '"' || c == '\'' || c == ')' || c == ']' || c == '}';
}

// Lower-case words that usually end in a dot without ending a sentence.
bool is_abbreviation(std::string_view word) {
  static constexpr std::array<std::string_view, 14> kWords = {
      "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "etc", "e.g", "i.e", "cf", "no"};
  std::string lower(word);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return std::find(kWords.begin(), kWords.end(), lower) != kWords.end();
}

// Does `text` (no trailing whitespace) end with a sentence terminator?
bool ends_sentence(std::string_view text) {
  size_t end = text.size();
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  for (;;) {  // closing quotes/brackets, ASCII or UTF-8 right quotes (E2 80 99 / E2 80 9D)
    if (end > 0 && is_closer(text[end - 1])) {
      --end;
    } else if (end >= 3 && byte(end - 3) == 0xE2 && byte(end - 2) == 0x80 &&
               (byte(end - 1) == 0x99 || byte(end - 1) == 0x9D)) {
      end -= 3;
    } else {
      break;
    }
  }
  if (end >= 3 && byte(end - 3) == 0xE2 && byte(end - 2) == 0x80 && byte(end - 1) == 0xA6)
    return true;  // U+2026 horizontal ellipsis
  if (end == 0) return false;
  const char term = text[end - 1];
  if (term == '!' || term == '?') return true;
  if (term != '.') return false;
  size_t begin = end - 1;
  if (begin >= 2 && text[begin - 1] == '.' && text[begin - 2] == '.') return true;  // "..."
  while (begin > 0 && !is_space(text[begin - 1])) --begin;
  return !is_abbreviation(text.substr(begin, end - 1 - begin));
}

}  // namespace

void SentenceSplitter::restore(const State& state) {
  if (state.tail.size() > kTailBytes)
    throw_error("sentence splitter: a tail of {} bytes, more than {}", state.tail.size(),
                kTailBytes);
  tail_ = state.tail;
  fresh_ = state.fresh;
}

void SentenceSplitter::reset() {
  tail_.clear();
  fresh_ = true;
}

bool SentenceSplitter::feed(std::string_view piece) {
  const size_t visible = piece.find_first_not_of(" \t\r\n");
  bool starts = false;
  if (visible != std::string_view::npos) {
    if (fresh_) {
      starts = true;
    } else {
      std::string before = tail_;
      before.append(piece.substr(0, visible));
      const size_t body_end = before.find_last_not_of(" \t\r\n") + 1;  // npos + 1 == 0
      const std::string_view gap = std::string_view(before).substr(body_end);
      starts = !gap.empty() && (gap.find('\n') != std::string_view::npos ||
                                ends_sentence(std::string_view(before).substr(0, body_end)));
    }
    fresh_ = false;
  }
  tail_.append(piece);
  if (tail_.size() > kTailBytes) tail_.erase(0, tail_.size() - kTailBytes);
  return starts;
}

std::vector<bool> sentence_starts(const std::vector<std::string_view>& pieces) {
  SentenceSplitter splitter;
  std::vector<bool> out;
  out.reserve(pieces.size());
  for (std::string_view p : pieces) out.push_back(splitter.feed(p));
  return out;
}

}  // namespace channel
