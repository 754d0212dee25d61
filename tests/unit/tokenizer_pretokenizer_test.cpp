// Pre-tokenizer splits against llama.cpp's regex splitter (the cases are in
// tokenizer_pretokenizer_cases.h), lengths and names. The Unicode helpers under them are
// tested in tokenizer_unicode_test.cpp.
#include <gtest/gtest.h>

#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/unicode.h"
#include "unit/tokenizer_pretokenizer_cases.h"
#include "util/error.h"

namespace channel {
namespace {

TEST(PreTokenizer, SplitsLikeLlamaCpp) {
  for (const test::SplitCase& c : test::kCases) {
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

}  // namespace
}  // namespace channel
