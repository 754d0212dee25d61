// Unicode helpers for the tokenizer: lenient UTF-8 decoding (the way llama.cpp
// treats invalid bytes), general-category flags for the pre-tokenizer, and the
// GPT-2 byte <-> code point mapping of byte-level BPE.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace channel::unicode {

// General-category bits of a code point (one category bit, plus whitespace).
enum CodepointFlag : uint8_t {
  kNumber = 1,        // \p{N}
  kLetter = 2,        // \p{L}
  kSeparator = 4,     // \p{Z}
  kMark = 8,          // \p{M}
  kPunctuation = 16,  // \p{P}
  kSymbol = 32,       // \p{S}
  kControl = 64,      // \p{C} except unassigned
  kWhitespace = 128,  // \s (the White_Space property)
};

// Category flags; 0 for unassigned code points and anything above U+10FFFF.
uint8_t codepoint_flags(uint32_t cpt);

constexpr uint32_t kReplacementChar = 0xFFFD;

// Byte length of the UTF-8 sequence a byte starts, from its high nibble alone
// (1 for ASCII and for stray continuation bytes, 4 for F0..FF).
inline size_t utf8_sequence_length(uint8_t lead) {
  static constexpr uint8_t kLengths[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLengths[lead >> 4];
}

// Decodes the code point at `offset` and advances past it. A malformed or
// truncated sequence (or one above U+10FFFF) yields U+FFFD and advances one byte.
// Overlong forms and surrogates are accepted, as llama.cpp does.
uint32_t decode_utf8(std::string_view text, size_t& offset);
std::vector<uint32_t> decode_utf8(std::string_view text);

// Appends the UTF-8 form of `cpt` (which must be <= U+10FFFF).
void append_utf8(std::string& out, uint32_t cpt);

// GPT-2 byte-level BPE: every byte has a printable stand-in code point
// ('!'..'~', U+00A1..U+00AC and U+00AE..U+00FF map to themselves, the other 68
// bytes to U+0100 upwards).
uint32_t byte_to_codepoint(uint8_t byte);
// The byte a stand-in code point represents, or -1 when it is not one.
int codepoint_to_byte(uint32_t cpt);

}  // namespace channel::unicode
