// The Unicode helpers under the pre-tokenizers: category flags, lenient UTF-8 decoding and
// GPT-2's byte-to-codepoint mapping.
#include <gtest/gtest.h>

#include "tokenizer/unicode.h"
#include "tokenizer/unicode_tables.h"

namespace channel {
namespace {

TEST(Unicode, CategoryFlags) {
  using namespace unicode;
  EXPECT_EQ(codepoint_flags('A'), kLetter);
  EXPECT_EQ(codepoint_flags('7'), kNumber);
  EXPECT_EQ(codepoint_flags(' '), kSeparator | kWhitespace);
  EXPECT_EQ(codepoint_flags('\n'), kControl | kWhitespace);
  EXPECT_EQ(codepoint_flags('!'), kPunctuation);
  EXPECT_EQ(codepoint_flags('$'), kSymbol);
  EXPECT_EQ(codepoint_flags(0x00A0), kSeparator | kWhitespace);  // no-break space
  EXPECT_EQ(codepoint_flags(0x0085), kControl | kWhitespace);    // next line
  EXPECT_EQ(codepoint_flags(0x4E2D), kLetter);                   // CJK
  EXPECT_EQ(codepoint_flags(0x0663), kNumber);                   // Arabic-Indic three
  EXPECT_EQ(codepoint_flags(0x216B), kNumber);                   // Roman numeral twelve (Nl)
  EXPECT_EQ(codepoint_flags(0x0301), kMark);                     // combining acute
  EXPECT_EQ(codepoint_flags(0x1F600), kSymbol);                  // emoji
  EXPECT_EQ(codepoint_flags(0xE000), kControl);                  // private use
  EXPECT_EQ(codepoint_flags(0x2EBF0), kLetter);                  // CJK Ext. I (Unicode 15.1)
  EXPECT_EQ(codepoint_flags(0x0378), 0);                         // unassigned
  EXPECT_EQ(codepoint_flags(0x110000), 0);
  EXPECT_EQ(codepoint_flags(0xFFFFFFFF), 0);
  for (size_t i = 1; i < kCodepointRangeCount; ++i) {
    ASSERT_LT(kCodepointRanges[i - 1].first, kCodepointRanges[i].first);
  }
}

TEST(Unicode, LenientDecoding) {
  using unicode::decode_utf8;
  using unicode::kReplacementChar;
  EXPECT_EQ(decode_utf8("a\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80"),
            (std::vector<uint32_t>{'a', 0xE9, 0x4E2D, 0x1F600}));
  // Stray continuation, truncated sequences, bad leads: one U+FFFD per byte consumed.
  EXPECT_EQ(decode_utf8("\x80"), (std::vector<uint32_t>{kReplacementChar}));
  EXPECT_EQ(decode_utf8("\xC3"), (std::vector<uint32_t>{kReplacementChar}));
  EXPECT_EQ(decode_utf8("\xE4\xB8"), (std::vector<uint32_t>{kReplacementChar, kReplacementChar}));
  EXPECT_EQ(decode_utf8("\xF8\x41"), (std::vector<uint32_t>{kReplacementChar, 'A'}));
  EXPECT_EQ(decode_utf8("\xF5\x80\x80\x80").front(), kReplacementChar);  // above U+10FFFF
  EXPECT_EQ(decode_utf8("\xC0\x80"), (std::vector<uint32_t>{0}));        // overlong: accepted
  for (uint32_t cpt : {0x0u, 0x7Fu, 0x80u, 0x7FFu, 0x800u, 0xFFFFu, 0x10000u, 0x10FFFFu}) {
    std::string s;
    unicode::append_utf8(s, cpt);
    EXPECT_EQ(decode_utf8(s), (std::vector<uint32_t>{cpt}));
  }
  EXPECT_EQ(unicode::utf8_sequence_length(0x41), 1u);
  EXPECT_EQ(unicode::utf8_sequence_length(0x80), 1u);
  EXPECT_EQ(unicode::utf8_sequence_length(0xC3), 2u);
  EXPECT_EQ(unicode::utf8_sequence_length(0xE2), 3u);
  EXPECT_EQ(unicode::utf8_sequence_length(0xFF), 4u);
}

TEST(Unicode, Gpt2ByteMappingIsABijection) {
  std::vector<bool> seen(324, false);
  for (int b = 0; b < 256; ++b) {
    const uint32_t cpt = unicode::byte_to_codepoint(static_cast<uint8_t>(b));
    ASSERT_LT(cpt, 324u);
    EXPECT_FALSE(seen[cpt]);
    seen[cpt] = true;
    EXPECT_EQ(unicode::codepoint_to_byte(cpt), b);
  }
  EXPECT_EQ(unicode::byte_to_codepoint(' '), 0x120u);   // 'Ġ'
  EXPECT_EQ(unicode::byte_to_codepoint('\n'), 0x10Au);  // 'Ċ'
  EXPECT_EQ(unicode::byte_to_codepoint('a'), static_cast<uint32_t>('a'));
  EXPECT_EQ(unicode::codepoint_to_byte(0x4E2D), -1);
}

}  // namespace
}  // namespace channel
