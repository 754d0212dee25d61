// What of a chat reply being generated can go out now, for every streaming API: a leading
// <think> block as reasoning, then the content as generated, its leading blanks dropped and
// trailing ones held until more text follows (the parsed content is trimmed). With tools
// offered the content goes out up to the family's call marker (ChatSession::tool_marker):
// a partial marker is held until known, and from the marker on nothing more is content
// (the calls come whole, parsed, at the end).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "chat/reasoning_split.h"

namespace channel::server {

class ReplyStream {
 public:
  explicit ReplyStream(std::string tool_marker) : marker_(std::move(tool_marker)) {}
  struct Piece {
    bool reasoning = false;
    std::string text;
  };
  std::vector<Piece> push(std::string_view text);
  // At the reply's end: what was held that is content after all (a partial marker).
  std::vector<Piece> finish();
  bool reasoning_streamed() const { return thinking_; }
  // The reply's parsed content beyond what went out (text after its calls, ...).
  std::string rest_of(const std::string& parsed_content) const;

 private:
  void content(std::string_view text, bool final, std::vector<Piece>& out);
  std::string marker_;
  ReasoningStream split_;
  std::string pending_;   // content not handed out yet
  std::string streamed_;  // content handed out
  bool thinking_ = false, started_ = false, in_call_ = false;
};

}  // namespace channel::server
