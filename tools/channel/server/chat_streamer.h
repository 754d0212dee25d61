// A chat reply streamed as chat.completion.chunk SSE (chat completions and named sessions):
// a leading <think> block as reasoning_content deltas, then the content as it is generated.
// With tools offered the content streams too, up to a call: the text before the family's
// call marker goes out, a partial marker and trailing blanks are held until known, and once
// the marker appears nothing more streams; the calls come whole at the end, with whatever
// content was held.
#pragma once

#include <string>
#include <string_view>

#include "chat/chat_session.h"
#include "chat/reasoning_split.h"
#include "server/openai_response.h"

namespace channel::server {

class ChatStreamer {
 public:
  // `tool_marker`: ChatSession::tool_marker() ("" without tools).
  ChatStreamer(const ResponseMeta& meta, StreamedLogprobs& lp, std::string tool_marker);
  // The SSE chunks for one piece of generated text ("" when nothing is due yet). Call
  // lp.emitted() for the piece first.
  std::string push(std::string_view text);
  // The closing chunks: the content not streamed, the reasoning when nothing streamed it, the
  // calls, the logprobs left, and the finish chunk (usage and [DONE] are the caller's).
  std::string end(const ChatReply& reply);

 private:
  std::string content(std::string_view text, bool final);
  const ResponseMeta& meta_;
  StreamedLogprobs& lp_;
  std::string marker_;
  ReasoningStream split_;
  std::string pending_;   // content not sent yet
  std::string streamed_;  // content sent (after its leading blanks)
  bool thinking_ = false, started_ = false, in_call_ = false;
};

}  // namespace channel::server
