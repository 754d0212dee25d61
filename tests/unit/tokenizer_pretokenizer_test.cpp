// Pre-tokenizer splits and the Unicode helpers under them. The expected splits
// were produced by llama.cpp's regex splitter on the same strings.
#include <gtest/gtest.h>

#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/unicode.h"
#include "tokenizer/unicode_tables.h"
#include "util/error.h"

namespace channel {
namespace {

struct SplitCase {
  PreTokenizer kind;
  std::string text;
  std::vector<std::string> words;
};

const SplitCase kCases[] = {
    {PreTokenizer::gpt2, "Hello world", {"Hello", " world"}},
    {PreTokenizer::gpt2, " Hello  world ", {" Hello", " ", " world", " "}},
    {PreTokenizer::gpt2,
     "I'm you're HE'LL they've we'D it's",
     {"I", "'m", " you", "'re", " HE", "'", "LL", " they", "'ve", " we", "'", "D", " it", "'s"}},
    {PreTokenizer::gpt2, "don't'S", {"don", "'t", "'", "S"}},
    {PreTokenizer::gpt2, "3.14159 and 1234567", {"3", ".", "14159", " and", " 1234567"}},
    {PreTokenizer::gpt2, "a1b22c333d4444", {"a", "1", "b", "22", "c", "333", "d", "4444"}},
    {PreTokenizer::gpt2, "   leading", {"  ", " leading"}},
    {PreTokenizer::gpt2, "trailing   ", {"trailing", "   "}},
    {PreTokenizer::gpt2,
     "line one\nline two\r\n\r\nend",
     {"line", " one", "\n", "line", " two", "\r\n\r", "\n", "end"}},
    {PreTokenizer::gpt2, "x \t \n y", {"x", " \t \n", " y"}},
    {PreTokenizer::gpt2, "!!!???...,,, $+<=>^~|`_", {"!!!???...,,,", " $+<=>^~|`_"}},
    {PreTokenizer::gpt2,
     "(hi) [there] {you}",
     {"(", "hi", ")", " [", "there", "]", " {", "you", "}"}},
    {PreTokenizer::gpt2,
     "Caf\xC3"
     "\xA9"
     " na\xC3"
     "\xAF"
     "ve",
     {"Caf\xC3"
      "\xA9"
      "",
      " na\xC3"
      "\xAF"
      "ve"}},
    {PreTokenizer::gpt2,
     "\xE6"
     "\x97"
     "\xA5"
     "\xE6"
     "\x9C"
     "\xAC"
     "\xE8"
     "\xAA"
     "\x9E"
     "\xE3"
     "\x81"
     "\xAE"
     "\xE3"
     "\x83"
     "\x86"
     "\xE3"
     "\x82"
     "\xAD"
     "\xE3"
     "\x82"
     "\xB9"
     "\xE3"
     "\x83"
     "\x88"
     "",
     {"\xE6"
      "\x97"
      "\xA5"
      "\xE6"
      "\x9C"
      "\xAC"
      "\xE8"
      "\xAA"
      "\x9E"
      "\xE3"
      "\x81"
      "\xAE"
      "\xE3"
      "\x83"
      "\x86"
      "\xE3"
      "\x82"
      "\xAD"
      "\xE3"
      "\x82"
      "\xB9"
      "\xE3"
      "\x83"
      "\x88"
      ""}},
    {PreTokenizer::gpt2,
     "\xD9"
     "\xA3"
     "\xD9"
     "\xA4"
     " \xE2"
     "\x85"
     "\xAB"
     "",
     {"\xD9"
      "\xA3"
      "\xD9"
      "\xA4"
      "",
      " \xE2"
      "\x85"
      "\xAB"
      ""}},
    {PreTokenizer::gpt2,
     "a\xC2"
     "\xA0"
     "b\xE3"
     "\x80"
     "\x80"
     "c",
     {"a",
      "\xC2"
      "\xA0"
      "",
      "b",
      "\xE3"
      "\x80"
      "\x80"
      "",
      "c"}},
    {PreTokenizer::gpt2,
     "e\xCC"
     "\x81"
     "t\xC3"
     "\xA9"
     "",
     {"e",
      "\xCC"
      "\x81"
      "",
      "t\xC3"
      "\xA9"
      ""}},
    {PreTokenizer::gpt2,
     "\xF0"
     "\x9F"
     "\x98"
     "\x80"
     "\xF0"
     "\x9F"
     "\x91"
     "\x8D"
     "\xF0"
     "\x9F"
     "\x8F"
     "\xBD"
     " ok",
     {"\xF0"
      "\x9F"
      "\x98"
      "\x80"
      "\xF0"
      "\x9F"
      "\x91"
      "\x8D"
      "\xF0"
      "\x9F"
      "\x8F"
      "\xBD"
      "",
      " ok"}},
    {PreTokenizer::gpt2,
     "bad\xFF"
     "byte",
     {"bad",
      "\xEF"
      "\xBF"
      "\xBD"
      "",
      "byte"}},
    {PreTokenizer::gpt2, "\t\tindent", {"\t", "\t", "indent"}},
    {PreTokenizer::gpt2, "a\n\n\n", {"a", "\n\n\n"}},
    {PreTokenizer::gpt2, "  \n  x", {"  \n ", " x"}},
    {PreTokenizer::gpt2, "--help=yes", {"--", "help", "=", "yes"}},
    {PreTokenizer::gpt2, "$100 + 50% = ?", {"$", "100", " +", " 50", "%", " =", " ?"}},
    {PreTokenizer::gpt2, "#include <stdio.h>", {"#", "include", " <", "stdio", ".", "h", ">"}},
    {PreTokenizer::gpt2, "    return 0;", {"   ", " return", " 0", ";"}},
    {PreTokenizer::llama3, "Hello world", {"Hello", " world"}},
    {PreTokenizer::llama3, " Hello  world ", {" Hello", " ", " world", " "}},
    {PreTokenizer::llama3,
     "I'm you're HE'LL they've we'D it's",
     {"I", "'m", " you", "'re", " HE", "'LL", " they", "'ve", " we", "'D", " it", "'s"}},
    {PreTokenizer::llama3, "don't'S", {"don", "'t", "'S"}},
    {PreTokenizer::llama3,
     "3.14159 and 1234567",
     {"3", ".", "141", "59", " and", " ", "123", "456", "7"}},
    {PreTokenizer::llama3, "a1b22c333d4444", {"a", "1", "b", "22", "c", "333", "d", "444", "4"}},
    {PreTokenizer::llama3, "   leading", {"  ", " leading"}},
    {PreTokenizer::llama3, "trailing   ", {"trailing", "   "}},
    {PreTokenizer::llama3,
     "line one\nline two\r\n\r\nend",
     {"line", " one", "\n", "line", " two", "\r\n\r\n", "end"}},
    {PreTokenizer::llama3, "x \t \n y", {"x", " \t \n", " y"}},
    {PreTokenizer::llama3, "!!!???...,,, $+<=>^~|`_", {"!!!???...,,,", " $+<=>^~|`_"}},
    {PreTokenizer::llama3,
     "(hi) [there] {you}",
     {"(hi", ")", " [", "there", "]", " {", "you", "}"}},
    {PreTokenizer::llama3,
     "Caf\xC3"
     "\xA9"
     " na\xC3"
     "\xAF"
     "ve",
     {"Caf\xC3"
      "\xA9"
      "",
      " na\xC3"
      "\xAF"
      "ve"}},
    {PreTokenizer::llama3,
     "\xE6"
     "\x97"
     "\xA5"
     "\xE6"
     "\x9C"
     "\xAC"
     "\xE8"
     "\xAA"
     "\x9E"
     "\xE3"
     "\x81"
     "\xAE"
     "\xE3"
     "\x83"
     "\x86"
     "\xE3"
     "\x82"
     "\xAD"
     "\xE3"
     "\x82"
     "\xB9"
     "\xE3"
     "\x83"
     "\x88"
     "",
     {"\xE6"
      "\x97"
      "\xA5"
      "\xE6"
      "\x9C"
      "\xAC"
      "\xE8"
      "\xAA"
      "\x9E"
      "\xE3"
      "\x81"
      "\xAE"
      "\xE3"
      "\x83"
      "\x86"
      "\xE3"
      "\x82"
      "\xAD"
      "\xE3"
      "\x82"
      "\xB9"
      "\xE3"
      "\x83"
      "\x88"
      ""}},
    {PreTokenizer::llama3,
     "\xD9"
     "\xA3"
     "\xD9"
     "\xA4"
     " \xE2"
     "\x85"
     "\xAB"
     "",
     {"\xD9"
      "\xA3"
      "\xD9"
      "\xA4"
      "",
      " ",
      "\xE2"
      "\x85"
      "\xAB"
      ""}},
    {PreTokenizer::llama3,
     "a\xC2"
     "\xA0"
     "b\xE3"
     "\x80"
     "\x80"
     "c",
     {"a",
      "\xC2"
      "\xA0"
      "b",
      "\xE3"
      "\x80"
      "\x80"
      "c"}},
    {PreTokenizer::llama3,
     "e\xCC"
     "\x81"
     "t\xC3"
     "\xA9"
     "",
     {"e",
      "\xCC"
      "\x81"
      "t\xC3"
      "\xA9"
      ""}},
    {PreTokenizer::llama3,
     "\xF0"
     "\x9F"
     "\x98"
     "\x80"
     "\xF0"
     "\x9F"
     "\x91"
     "\x8D"
     "\xF0"
     "\x9F"
     "\x8F"
     "\xBD"
     " ok",
     {"\xF0"
      "\x9F"
      "\x98"
      "\x80"
      "\xF0"
      "\x9F"
      "\x91"
      "\x8D"
      "\xF0"
      "\x9F"
      "\x8F"
      "\xBD"
      "",
      " ok"}},
    {PreTokenizer::llama3,
     "bad\xFF"
     "byte",
     {"bad",
      "\xEF"
      "\xBF"
      "\xBD"
      "byte"}},
    {PreTokenizer::llama3, "\t\tindent", {"\t", "\tindent"}},
    {PreTokenizer::llama3, "a\n\n\n", {"a", "\n\n\n"}},
    {PreTokenizer::llama3, "  \n  x", {"  \n", " ", " x"}},
    {PreTokenizer::llama3, "--help=yes", {"--", "help", "=yes"}},
    {PreTokenizer::llama3, "$100 + 50% = ?", {"$", "100", " +", " ", "50", "%", " =", " ?"}},
    {PreTokenizer::llama3, "#include <stdio.h>", {"#include", " <", "stdio", ".h", ">"}},
    {PreTokenizer::llama3, "    return 0;", {"   ", " return", " ", "0", ";"}},
    {PreTokenizer::qwen2, "Hello world", {"Hello", " world"}},
    {PreTokenizer::qwen2, " Hello  world ", {" Hello", " ", " world", " "}},
    {PreTokenizer::qwen2,
     "I'm you're HE'LL they've we'D it's",
     {"I", "'m", " you", "'re", " HE", "'LL", " they", "'ve", " we", "'D", " it", "'s"}},
    {PreTokenizer::qwen2, "don't'S", {"don", "'t", "'S"}},
    {PreTokenizer::qwen2,
     "3.14159 and 1234567",
     {"3", ".", "1", "4", "1", "5", "9", " and", " ", "1", "2", "3", "4", "5", "6", "7"}},
    {PreTokenizer::qwen2,
     "a1b22c333d4444",
     {"a", "1", "b", "2", "2", "c", "3", "3", "3", "d", "4", "4", "4", "4"}},
    {PreTokenizer::qwen2, "   leading", {"  ", " leading"}},
    {PreTokenizer::qwen2, "trailing   ", {"trailing", "   "}},
    {PreTokenizer::qwen2,
     "line one\nline two\r\n\r\nend",
     {"line", " one", "\n", "line", " two", "\r\n\r\n", "end"}},
    {PreTokenizer::qwen2, "x \t \n y", {"x", " \t \n", " y"}},
    {PreTokenizer::qwen2, "!!!???...,,, $+<=>^~|`_", {"!!!???...,,,", " $+<=>^~|`_"}},
    {PreTokenizer::qwen2,
     "(hi) [there] {you}",
     {"(hi", ")", " [", "there", "]", " {", "you", "}"}},
    {PreTokenizer::qwen2,
     "Caf\xC3"
     "\xA9"
     " na\xC3"
     "\xAF"
     "ve",
     {"Caf\xC3"
      "\xA9"
      "",
      " na\xC3"
      "\xAF"
      "ve"}},
    {PreTokenizer::qwen2,
     "\xE6"
     "\x97"
     "\xA5"
     "\xE6"
     "\x9C"
     "\xAC"
     "\xE8"
     "\xAA"
     "\x9E"
     "\xE3"
     "\x81"
     "\xAE"
     "\xE3"
     "\x83"
     "\x86"
     "\xE3"
     "\x82"
     "\xAD"
     "\xE3"
     "\x82"
     "\xB9"
     "\xE3"
     "\x83"
     "\x88"
     "",
     {"\xE6"
      "\x97"
      "\xA5"
      "\xE6"
      "\x9C"
      "\xAC"
      "\xE8"
      "\xAA"
      "\x9E"
      "\xE3"
      "\x81"
      "\xAE"
      "\xE3"
      "\x83"
      "\x86"
      "\xE3"
      "\x82"
      "\xAD"
      "\xE3"
      "\x82"
      "\xB9"
      "\xE3"
      "\x83"
      "\x88"
      ""}},
    {PreTokenizer::qwen2,
     "\xD9"
     "\xA3"
     "\xD9"
     "\xA4"
     " \xE2"
     "\x85"
     "\xAB"
     "",
     {"\xD9"
      "\xA3"
      "",
      "\xD9"
      "\xA4"
      "",
      " ",
      "\xE2"
      "\x85"
      "\xAB"
      ""}},
    {PreTokenizer::qwen2,
     "a\xC2"
     "\xA0"
     "b\xE3"
     "\x80"
     "\x80"
     "c",
     {"a",
      "\xC2"
      "\xA0"
      "b",
      "\xE3"
      "\x80"
      "\x80"
      "c"}},
    {PreTokenizer::qwen2,
     "e\xCC"
     "\x81"
     "t\xC3"
     "\xA9"
     "",
     {"e",
      "\xCC"
      "\x81"
      "t\xC3"
      "\xA9"
      ""}},
    {PreTokenizer::qwen2,
     "\xF0"
     "\x9F"
     "\x98"
     "\x80"
     "\xF0"
     "\x9F"
     "\x91"
     "\x8D"
     "\xF0"
     "\x9F"
     "\x8F"
     "\xBD"
     " ok",
     {"\xF0"
      "\x9F"
      "\x98"
      "\x80"
      "\xF0"
      "\x9F"
      "\x91"
      "\x8D"
      "\xF0"
      "\x9F"
      "\x8F"
      "\xBD"
      "",
      " ok"}},
    {PreTokenizer::qwen2,
     "bad\xFF"
     "byte",
     {"bad",
      "\xEF"
      "\xBF"
      "\xBD"
      "byte"}},
    {PreTokenizer::qwen2, "\t\tindent", {"\t", "\tindent"}},
    {PreTokenizer::qwen2, "a\n\n\n", {"a", "\n\n\n"}},
    {PreTokenizer::qwen2, "  \n  x", {"  \n", " ", " x"}},
    {PreTokenizer::qwen2, "--help=yes", {"--", "help", "=yes"}},
    {PreTokenizer::qwen2,
     "$100 + 50% = ?",
     {"$", "1", "0", "0", " +", " ", "5", "0", "%", " =", " ?"}},
    {PreTokenizer::qwen2, "#include <stdio.h>", {"#include", " <", "stdio", ".h", ">"}},
    {PreTokenizer::qwen2, "    return 0;", {"   ", " return", " ", "0", ";"}},
    {PreTokenizer::standard, "Hello world", {"Hello", " world"}},
    {PreTokenizer::standard, " Hello  world ", {" Hello", " ", " world", " "}},
    {PreTokenizer::standard,
     "I'm you're HE'LL they've we'D it's",
     {"I", "'", "m", " you", "'", "re", " HE", "'", "LL", " they", "'", "ve", " we", "'", "D",
      " it", "'", "s"}},
    {PreTokenizer::standard, "don't'S", {"don", "'", "t", "'", "S"}},
    {PreTokenizer::standard,
     "3.14159 and 1234567",
     {"3", ".", "141", "59", " and", " ", "123", "456", "7"}},
    {PreTokenizer::standard, "a1b22c333d4444", {"a", "1", "b", "22", "c", "333", "d", "444", "4"}},
    {PreTokenizer::standard, "   leading", {"  ", " leading"}},
    {PreTokenizer::standard, "trailing   ", {"trailing", "   "}},
    {PreTokenizer::standard,
     "line one\nline two\r\n\r\nend",
     {"line", " one", "\n", "line", " two", "\r\n\r", "\n", "end"}},
    {PreTokenizer::standard, "x \t \n y", {"x", " \t \n", " y"}},
    {PreTokenizer::standard,
     "!!!???...,,, $+<=>^~|`_",
     {"!!!???...,,,", " ", "$+<=>^~|", "`", "_"}},
    {PreTokenizer::standard,
     "(hi) [there] {you}",
     {"(", "hi", ")", " ", "[", "there", "]", " ", "{", "you", "}"}},
    {PreTokenizer::standard,
     "Caf\xC3"
     "\xA9"
     " na\xC3"
     "\xAF"
     "ve",
     {"Caf\xC3"
      "\xA9"
      "",
      " na\xC3"
      "\xAF"
      "ve"}},
    {PreTokenizer::standard,
     "\xE6"
     "\x97"
     "\xA5"
     "\xE6"
     "\x9C"
     "\xAC"
     "\xE8"
     "\xAA"
     "\x9E"
     "\xE3"
     "\x81"
     "\xAE"
     "\xE3"
     "\x83"
     "\x86"
     "\xE3"
     "\x82"
     "\xAD"
     "\xE3"
     "\x82"
     "\xB9"
     "\xE3"
     "\x83"
     "\x88"
     "",
     {"\xE6"
      "\x97"
      "\xA5"
      "\xE6"
      "\x9C"
      "\xAC"
      "\xE8"
      "\xAA"
      "\x9E"
      "\xE3"
      "\x81"
      "\xAE"
      "\xE3"
      "\x83"
      "\x86"
      "\xE3"
      "\x82"
      "\xAD"
      "\xE3"
      "\x82"
      "\xB9"
      "\xE3"
      "\x83"
      "\x88"
      ""}},
    {PreTokenizer::standard,
     "\xD9"
     "\xA3"
     "\xD9"
     "\xA4"
     " \xE2"
     "\x85"
     "\xAB"
     "",
     {"\xD9"
      "\xA3"
      "\xD9"
      "\xA4"
      "",
      " ",
      "\xE2"
      "\x85"
      "\xAB"
      ""}},
    {PreTokenizer::standard,
     "a\xC2"
     "\xA0"
     "b\xE3"
     "\x80"
     "\x80"
     "c",
     {"a",
      "\xC2"
      "\xA0"
      "",
      "b",
      "\xE3"
      "\x80"
      "\x80"
      "",
      "c"}},
    {PreTokenizer::standard,
     "e\xCC"
     "\x81"
     "t\xC3"
     "\xA9"
     "",
     {"e",
      "\xCC"
      "\x81"
      "",
      "t\xC3"
      "\xA9"
      ""}},
    {PreTokenizer::standard,
     "\xF0"
     "\x9F"
     "\x98"
     "\x80"
     "\xF0"
     "\x9F"
     "\x91"
     "\x8D"
     "\xF0"
     "\x9F"
     "\x8F"
     "\xBD"
     " ok",
     {"\xF0"
      "\x9F"
      "\x98"
      "\x80"
      "\xF0"
      "\x9F"
      "\x91"
      "\x8D"
      "\xF0"
      "\x9F"
      "\x8F"
      "\xBD"
      "",
      " ok"}},
    {PreTokenizer::standard,
     "bad\xFF"
     "byte",
     {"bad",
      "\xEF"
      "\xBF"
      "\xBD"
      "",
      "byte"}},
    {PreTokenizer::standard, "\t\tindent", {"\t", "\t", "indent"}},
    {PreTokenizer::standard, "a\n\n\n", {"a", "\n\n\n"}},
    {PreTokenizer::standard, "  \n  x", {"  \n ", " x"}},
    {PreTokenizer::standard, "--help=yes", {"--", "help", "=", "yes"}},
    {PreTokenizer::standard,
     "$100 + 50% = ?",
     {"$", "100", " ", "+", " ", "50", "%", " ", "=", " ", "?"}},
    {PreTokenizer::standard,
     "#include <stdio.h>",
     {"#", "include", " ", "<", "stdio", ".", "h", ">"}},
    {PreTokenizer::standard, "    return 0;", {"   ", " return", " ", "0", ";"}},
};

TEST(PreTokenizer, SplitsLikeLlamaCpp) {
  for (const SplitCase& c : kCases) {
    EXPECT_EQ(pre_tokenize_words(c.kind, c.text), c.words)
        << pre_tokenizer_name(c.kind) << ": " << c.text;
  }
}

TEST(PreTokenizer, LengthsCoverTheInput) {
  const std::string text = "Mixed 123 text,\n\n  with\tall  kinds!!! of \xE4\xB8\xAD\xE6\x96\x87";
  const std::vector<uint32_t> cpts = unicode::decode_utf8(text);
  for (PreTokenizer k :
       {PreTokenizer::standard, PreTokenizer::gpt2, PreTokenizer::llama3, PreTokenizer::qwen2}) {
    size_t total = 0;
    for (size_t len : pre_tokenize(k, cpts)) {
      EXPECT_GT(len, 0u);
      total += len;
    }
    EXPECT_EQ(total, cpts.size());
    EXPECT_TRUE(pre_tokenize(k, {}).empty());
  }
}

TEST(PreTokenizer, Names) {
  EXPECT_EQ(pre_tokenizer_from_name("llama-bpe"), PreTokenizer::llama3);
  EXPECT_EQ(pre_tokenizer_from_name("llama3"), PreTokenizer::llama3);
  EXPECT_EQ(pre_tokenizer_from_name("qwen2"), PreTokenizer::qwen2);
  EXPECT_EQ(pre_tokenizer_from_name("gpt-2"), PreTokenizer::gpt2);
  EXPECT_EQ(pre_tokenizer_from_name("default"), PreTokenizer::standard);
  EXPECT_EQ(pre_tokenizer_from_name(""), PreTokenizer::standard);
  EXPECT_THROW(pre_tokenizer_from_name("falcon"), Error);
}

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
