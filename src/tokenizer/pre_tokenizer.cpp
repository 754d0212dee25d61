// Hand-written pre-tokenizer splitters (see pre_tokenizer.h). Each pass walks the
// current segments and cuts them into smaller ones; a segment's neighbours are
// invisible to it, exactly as when a regex runs on each piece separately.
#include "tokenizer/pre_tokenizer.h"

#include "tokenizer/unicode.h"
#include "util/error.h"

namespace channel {

namespace {

using unicode::codepoint_flags;

constexpr uint32_t kNoCodepoint = 0xFFFFFFFF;

// One segment [begin, end) of the code points; reads outside it see nothing.
class Segment {
 public:
  Segment(std::span<const uint32_t> cpts, size_t begin, size_t end)
      : cpts_(cpts), begin_(begin), end_(end) {}

  size_t begin() const { return begin_; }
  size_t end() const { return end_; }
  bool in(size_t i) const { return i >= begin_ && i < end_; }
  uint32_t cpt(size_t i) const { return in(i) ? cpts_[i] : kNoCodepoint; }
  uint8_t flags(size_t i) const { return in(i) ? codepoint_flags(cpts_[i]) : 0; }
  bool letter(size_t i) const { return flags(i) & unicode::kLetter; }
  bool number(size_t i) const { return flags(i) & unicode::kNumber; }
  bool space(size_t i) const { return flags(i) & unicode::kWhitespace; }
  bool newline(size_t i) const { return cpt(i) == '\r' || cpt(i) == '\n'; }
  // [^\s\p{L}\p{N}]: any code point of the segment that is none of those.
  bool other(size_t i) const {
    return in(i) && !(flags(i) & (unicode::kWhitespace | unicode::kLetter | unicode::kNumber));
  }

 private:
  std::span<const uint32_t> cpts_;
  size_t begin_, end_;
};

uint32_t ascii_lower(uint32_t c) {
  return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

// 's|'t|'re|'ve|'m|'ll|'d at `pos`: the match length, or 0.
size_t contraction_length(const Segment& s, size_t pos, bool any_case) {
  if (s.cpt(pos) != '\'' || !s.in(pos + 1)) return 0;
  const auto at = [&](size_t i) { return any_case ? ascii_lower(s.cpt(i)) : s.cpt(i); };
  const uint32_t a = at(pos + 1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (!s.in(pos + 2)) return 0;
  const uint32_t b = at(pos + 2);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

// \s+(?!\S)|\s+ (and, for llama3, \s*[\r\n]+ first): where the word ends.
size_t whitespace_end(const Segment& s, size_t pos, bool newline_rule) {
  size_t end = pos;
  size_t after_last_newline = 0;
  while (s.space(end)) {
    if (newline_rule && s.newline(end)) after_last_newline = end + 1;
    ++end;
  }
  if (after_last_newline != 0) return after_last_newline;
  // A run followed by more text leaves its last space to prefix the next word.
  if (end - pos > 1 && s.in(end)) return end - 1;
  if (end > pos) return end;
  return pos + 1;  // nothing matched: the code point stands alone
}

// GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
void split_gpt2(const Segment& s, std::vector<size_t>& out) {
  for (size_t pos = s.begin(); pos < s.end();) {
    size_t end = pos + contraction_length(s, pos, false);
    if (end == pos) {
      const size_t q = pos + (s.cpt(pos) == ' ');  // after the optional leading space
      if (s.letter(q)) {
        for (end = q; s.letter(end);) ++end;
      } else if (s.number(q)) {
        for (end = q; s.number(end);) ++end;
      } else if (s.other(q)) {
        for (end = q; s.other(end);) ++end;
      } else {
        end = whitespace_end(s, pos, false);
      }
    }
    out.push_back(end - pos);
    pos = end;
  }
}

// Llama 3 / Qwen 2: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}|
//                   ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
void split_llama3(const Segment& s, size_t max_digits, std::vector<size_t>& out) {
  for (size_t pos = s.begin(); pos < s.end();) {
    size_t end = pos + contraction_length(s, pos, true);
    if (end == pos) {
      const bool may_prefix = !s.newline(pos) && !s.number(pos);
      const size_t q = pos + (s.cpt(pos) == ' ');
      if (may_prefix && (s.letter(pos) || s.letter(pos + 1))) {
        for (end = pos + 1; s.letter(end);) ++end;
      } else if (s.number(pos)) {
        for (end = pos; s.number(end) && end - pos < max_digits;) ++end;
      } else if (s.other(q)) {
        for (end = q; s.other(end);) ++end;
        while (s.newline(end)) ++end;
      } else {
        end = whitespace_end(s, pos, true);
      }
    }
    out.push_back(end - pos);
    pos = end;
  }
}

// Splits a segment at every match of `match_length` (0 = no match at that position),
// keeping the text between matches as segments too (regex "Isolated" behaviour).
template <typename MatchLength>
void split_matches(const Segment& s, MatchLength match_length, std::vector<size_t>& out) {
  size_t gap_start = s.begin();
  for (size_t pos = s.begin(); pos < s.end();) {
    const size_t len = match_length(pos);
    if (len == 0) {
      ++pos;
      continue;
    }
    if (pos > gap_start) out.push_back(pos - gap_start);
    out.push_back(len);
    pos += len;
    gap_start = pos;
  }
  if (s.end() > gap_start) out.push_back(s.end() - gap_start);
}

// Runs `split` over every current segment and returns the new segment lengths.
template <typename Split>
std::vector<size_t> apply_pass(std::span<const uint32_t> cpts, const std::vector<size_t>& segments,
                               Split split) {
  std::vector<size_t> out;  // [n_words]
  out.reserve(segments.size() * 2);
  size_t begin = 0;
  for (size_t len : segments) {
    split(Segment(cpts, begin, begin + len), out);
    begin += len;
  }
  return out;
}

bool is_ascii_digit(uint32_t c) {
  return c >= '0' && c <= '9';
}

// llama.cpp's fallback for "default": [\p{P}\$\+<=>\^~\|]+, then GPT-2, then \p{N}+,
// then [0-9][0-9][0-9].
std::vector<size_t> split_default(std::span<const uint32_t> cpts, std::vector<size_t> segments) {
  segments = apply_pass(cpts, segments, [](const Segment& s, std::vector<size_t>& out) {
    const auto punct = [&](size_t i) {
      const uint32_t c = s.cpt(i);
      if (c == '$' || c == '+' || c == '<' || c == '=' || c == '>' || c == '^' || c == '~' ||
          c == '|') {
        return true;
      }
      const uint8_t f = s.flags(i);
      return (f & unicode::kPunctuation) && !(f & unicode::kWhitespace);
    };
    split_matches(
        s,
        [&](size_t pos) {
          size_t end = pos;
          while (punct(end)) ++end;
          return end - pos;
        },
        out);
  });
  segments = apply_pass(cpts, segments, split_gpt2);
  segments = apply_pass(cpts, segments, [](const Segment& s, std::vector<size_t>& out) {
    split_matches(
        s,
        [&](size_t pos) {
          size_t end = pos;
          while (s.number(end)) ++end;
          return end - pos;
        },
        out);
  });
  return apply_pass(cpts, segments, [](const Segment& s, std::vector<size_t>& out) {
    split_matches(
        s,
        [&](size_t pos) -> size_t {
          const bool three = is_ascii_digit(s.cpt(pos)) && is_ascii_digit(s.cpt(pos + 1)) &&
                             is_ascii_digit(s.cpt(pos + 2));
          return three ? 3 : 0;
        },
        out);
  });
}

}  // namespace

PreTokenizer pre_tokenizer_from_name(std::string_view name) {
  if (name.empty() || name == "default") return PreTokenizer::standard;
  if (name == "gpt-2") return PreTokenizer::gpt2;
  if (name == "llama-bpe" || name == "llama3" || name == "llama-v3") return PreTokenizer::llama3;
  if (name == "qwen2" || name == "deepseek-r1-qwen") return PreTokenizer::qwen2;
  throw_error(
      "tokenizer: unsupported tokenizer.ggml.pre '{}' (supported: default, gpt-2, llama-bpe, "
      "qwen2)",
      name);
}

std::string_view pre_tokenizer_name(PreTokenizer kind) {
  switch (kind) {
    case PreTokenizer::standard:
      return "default";
    case PreTokenizer::gpt2:
      return "gpt-2";
    case PreTokenizer::llama3:
      return "llama-bpe";
    case PreTokenizer::qwen2:
      return "qwen2";
  }
  return "?";
}

std::vector<size_t> pre_tokenize(PreTokenizer kind, std::span<const uint32_t> cpts) {
  if (cpts.empty()) return {};
  const std::vector<size_t> whole = {cpts.size()};
  switch (kind) {
    case PreTokenizer::standard:
      return split_default(cpts, whole);
    case PreTokenizer::gpt2:
      return apply_pass(cpts, whole, split_gpt2);
    case PreTokenizer::llama3:
      return apply_pass(
          cpts, whole, [](const Segment& s, std::vector<size_t>& out) { split_llama3(s, 3, out); });
    case PreTokenizer::qwen2:
      return apply_pass(
          cpts, whole, [](const Segment& s, std::vector<size_t>& out) { split_llama3(s, 1, out); });
  }
  return whole;
}

std::vector<std::string> pre_tokenize_words(PreTokenizer kind, std::string_view text) {
  const std::vector<uint32_t> cpts = unicode::decode_utf8(text);
  std::vector<std::string> words;
  size_t begin = 0;
  for (size_t len : pre_tokenize(kind, cpts)) {
    std::string& w = words.emplace_back();
    for (size_t i = begin; i < begin + len; ++i) unicode::append_utf8(w, cpts[i]);
    begin += len;
  }
  return words;
}

}  // namespace channel
