// Span types and the sentence splitter that turns generated text into response_sentence spans.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kv/sentence_split.h"
#include "kv/span.h"

namespace channel {
namespace {

TEST(KvSpans, TypesHaveTheSpecsValuesAndNames) {
  EXPECT_EQ(static_cast<int>(SpanType::system), 0);
  EXPECT_EQ(static_cast<int>(SpanType::user), 1);
  EXPECT_EQ(static_cast<int>(SpanType::thought), 2);
  EXPECT_EQ(static_cast<int>(SpanType::tool_call), 3);
  EXPECT_EQ(static_cast<int>(SpanType::tool_result), 4);
  EXPECT_EQ(static_cast<int>(SpanType::response_sentence), 5);
  EXPECT_EQ(static_cast<int>(SpanType::turn_end), 6);
  for (int i = 0; i < kSpanTypeCount; ++i) {
    const auto t = static_cast<SpanType>(i);
    EXPECT_EQ(span_type_from_name(span_type_name(t)), t);
  }
  EXPECT_EQ(span_type_from_name("nonsense"), std::nullopt);
}

// Splits `text` at the pieces that start a sentence and returns the sentences.
std::vector<std::string> split(const std::vector<std::string_view>& pieces) {
  const std::vector<bool> starts = sentence_starts(pieces);
  std::vector<std::string> out;
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (starts[i] || out.empty()) out.emplace_back();
    out.back().append(pieces[i]);
  }
  return out;
}

using V = std::vector<std::string>;

TEST(KvSpans, SplitsAtSentenceEndsFollowedByWhitespace) {
  EXPECT_EQ(split({"Hello", " world", ".", " How", " are", " you", "?", " Fine", "!"}),
            (V{"Hello world.", " How are you?", " Fine!"}));
  // Whitespace-only pieces stay with the sentence they follow.
  EXPECT_EQ(split({"Done", ".", " ", "Next", " one", "."}), (V{"Done. ", "Next one."}));
  // Closing quotes and brackets after the terminator.
  EXPECT_EQ(split({"He", " said", " \"", "go", ".\"", " Then", " left", "."}),
            (V{"He said \"go.\"", " Then left."}));
  EXPECT_EQ(split({"(", "Yes", ".)", " No", "."}), (V{"(Yes.)", " No."}));
  // Ellipses, ASCII and U+2026.
  EXPECT_EQ(split({"Well", "...", " maybe"}), (V{"Well...", " maybe"}));
  EXPECT_EQ(split({"Well", "\xE2\x80\xA6", " maybe"}), (V{"Well\xE2\x80\xA6", " maybe"}));
  EXPECT_EQ(split({"She", " said", " \xE2\x80\x9Chi.\xE2\x80\x9D", " Then"}),
            (V{"She said \xE2\x80\x9Chi.\xE2\x80\x9D", " Then"}));
}

TEST(KvSpans, NewlinesEndSentences) {
  EXPECT_EQ(split({"- item", " one", "\n", "- item", " two"}), (V{"- item one\n", "- item two"}));
  EXPECT_EQ(split({"Title", "\n\n", "Body"}), (V{"Title\n\n", "Body"}));
  EXPECT_EQ(split({"a", "\nb"}), (V{"a", "\nb"}));
}

TEST(KvSpans, NoSplitInsideNumbersNamesOrAbbreviations) {
  EXPECT_EQ(split({"Pi", " is", " 3", ".", "14", " ok"}), (V{"Pi is 3.14 ok"}));
  EXPECT_EQ(split({"See", " example", ".com", " now"}), (V{"See example.com now"}));
  EXPECT_EQ(split({"Ask", " Dr", ".", " Smith", "."}), (V{"Ask Dr. Smith."}));
  EXPECT_EQ(split({"Fruit", ",", " e", ".g", ".", " apples"}), (V{"Fruit, e.g. apples"}));
  EXPECT_EQ(split({"Mr", ".", " X", " left", ".", " Mrs", ".", " Y", " stayed", "."}),
            (V{"Mr. X left.", " Mrs. Y stayed."}));
}

TEST(KvSpans, ByteByByteEqualsTokenPieces) {
  const std::string text = "First one. Second one? Third!\nFourth (quoted.) Fifth... sixth";
  std::vector<std::string_view> bytes;
  for (size_t i = 0; i < text.size(); ++i) bytes.push_back(std::string_view(text).substr(i, 1));
  EXPECT_EQ(split(bytes), (V{"First one. ", "Second one? ", "Third!\n", "Fourth (quoted.) ",
                             "Fifth... ", "sixth"}));
}

TEST(KvSpans, FirstVisiblePieceStartsAndResetRestarts) {
  SentenceSplitter s;
  EXPECT_FALSE(s.feed(""));
  EXPECT_FALSE(s.feed("  "));
  EXPECT_TRUE(s.feed("Hi"));
  EXPECT_FALSE(s.feed(" there"));
  s.reset();
  EXPECT_TRUE(s.feed("again"));
}

}  // namespace
}  // namespace channel
