// A chat reply streamed as chat.completion.chunk SSE (chat completions and named sessions):
// what ReplyStream hands out as it is generated (reasoning_content deltas, then content,
// with tools offered up to a call), then at the end the content not streamed, the calls and
// the finish chunk.
#pragma once

#include <string>
#include <string_view>

#include "chat/chat_session.h"
#include "server/openai_response.h"
#include "server/reply_stream.h"

namespace channel::server {

class ChatStreamer {
 public:
  // `tool_marker`: ChatSession::tool_marker() ("" without tools).
  ChatStreamer(const ResponseMeta& meta, StreamedLogprobs& lp, std::string tool_marker)
      : meta_(meta), lp_(lp), stream_(std::move(tool_marker)) {}
  // The SSE chunks for one piece of generated text ("" when nothing is due yet). Call
  // lp.emitted() for the piece first.
  std::string push(std::string_view text);
  // The closing chunks: the content not streamed, the reasoning when nothing streamed it, the
  // calls, the logprobs left, and the finish chunk (usage and [DONE] are the caller's).
  std::string end(const ChatReply& reply);

 private:
  std::string chunks(const std::vector<ReplyStream::Piece>& pieces);
  const ResponseMeta& meta_;
  StreamedLogprobs& lp_;
  ReplyStream stream_;
};

}  // namespace channel::server
