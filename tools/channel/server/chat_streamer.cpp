// Streaming a chat reply as SSE chunks (chat_streamer.h).
#include "server/chat_streamer.h"

namespace channel::server {

using nlohmann::json;

std::string ChatStreamer::chunks(const std::vector<ReplyStream::Piece>& pieces) {
  std::string out;
  for (const ReplyStream::Piece& p : pieces)
    out += p.reasoning ? sse(chat_chunk(meta_, {{"reasoning_content", p.text}}, nullptr))
                       : sse(chat_chunk(meta_, {{"content", p.text}}, nullptr, lp_.next()));
  return out;
}

std::string ChatStreamer::push(std::string_view text) {
  return chunks(stream_.push(text));
}

std::string ChatStreamer::end(const ChatReply& reply) {
  std::string out = chunks(stream_.finish());
  if (!stream_.reasoning_streamed() && !reply.parsed.reasoning.empty())
    out += sse(chat_chunk(meta_, {{"reasoning_content", reply.parsed.reasoning}}, nullptr));
  json rest = lp_.rest(reply.text.size());  // the first chunk below takes them
  if (const std::string more = stream_.rest_of(reply.parsed.content); !more.empty())
    out += sse(chat_chunk(meta_, {{"content", more}}, nullptr, std::exchange(rest, nullptr)));
  if (!reply.parsed.tool_calls.empty())
    out += sse(chat_chunk(meta_, {{"tool_calls", tool_calls_json(reply.parsed.tool_calls)}},
                          nullptr, std::exchange(rest, nullptr)));
  if (!rest.is_null()) out += sse(chat_chunk(meta_, {{"content", ""}}, nullptr, rest));
  out += sse(chat_chunk(meta_, json::object(), openai_finish(reply.finish)));
  return out;
}

}  // namespace channel::server
