// Reasoning blocks: split off a whole reply, and the same split piece by piece as it streams.
#include <gtest/gtest.h>

#include "chat/chat_formatter.h"
#include "chat/reasoning_split.h"

namespace channel {
namespace {

TEST(Reasoning, SplitsALeadingThinkBlock) {
  SplitReply r = split_reasoning("\n<think>\nFirst, 2+2.\n</think>\n\nIt is 4.");
  EXPECT_EQ(r.reasoning, "First, 2+2.");
  EXPECT_EQ(r.content, "\n\nIt is 4.");
  r = split_reasoning("It is 4. <think>not a block</think>");  // not at the start: content
  EXPECT_EQ(r.reasoning, "");
  EXPECT_EQ(r.content, "It is 4. <think>not a block</think>");
  r = split_reasoning("<think>cut off while thinking");
  EXPECT_EQ(r.reasoning, "cut off while thinking");
  EXPECT_EQ(r.content, "");
  r = split_reasoning("<think></think>Answer");
  EXPECT_EQ(r.reasoning, "");
  EXPECT_EQ(r.content, "Answer");
}

// Streams `reply` cut into pieces of `step` bytes; returns the reasoning and content texts.
std::pair<std::string, std::string> stream(const std::string& reply, size_t step) {
  ReasoningStream s;
  std::string reasoning, content;
  const auto take = [&](const std::vector<ReasoningStream::Piece>& pieces) {
    for (const auto& p : pieces) {
      if (p.reasoning) {
        EXPECT_EQ(p.text.find("</think>"), std::string::npos);  // the tag is held back
      }
      (p.reasoning ? reasoning : content) += p.text;
    }
  };
  for (size_t i = 0; i < reply.size(); i += step) take(s.push(reply.substr(i, step)));
  take(s.finish());
  return {reasoning, content};
}

TEST(Reasoning, StreamedPiecesAddUpToTheSplit) {
  for (const std::string& reply :
       {std::string("  <think>\nplan: a < b, and </thin is not a tag\n</think>\n\nDone <think>."),
        std::string("No block here <think>x</think>"), std::string("<thin"),
        std::string("<think>unclosed </thi"), std::string(" <"), std::string(""),
        std::string(" <think>a</thi</think>\n\nanswer <thin:\n"), std::string("\v\n<think>s(")}) {
    const SplitReply whole = split_reasoning(reply);
    for (size_t step : {1, 2, 3, 4, 7, 100}) {
      SCOPED_TRACE(reply + " / step " + std::to_string(step));
      const auto [reasoning, content] = stream(reply, step);
      EXPECT_EQ(std::string(trim_whitespace(reasoning)), whole.reasoning);
      EXPECT_EQ(content, whole.reasoning.empty() && reasoning.empty() ? reply : whole.content);
    }
  }
}

}  // namespace
}  // namespace channel
