// Streaming a chat reply as SSE chunks (chat_streamer.h).
#include "server/chat_streamer.h"

namespace channel::server {
namespace {

using nlohmann::json;

bool blank(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

// The longest end of `s` that begins `tag`.
size_t partial_at_end(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

}  // namespace

ChatStreamer::ChatStreamer(const ResponseMeta& meta, StreamedLogprobs& lp, std::string tool_marker)
    : meta_(meta), lp_(lp), marker_(std::move(tool_marker)) {}

// The chunk for content that can go out now: with a marker, the text before it (held back
// while it may be one, and its trailing blanks until more text follows).
std::string ChatStreamer::content(std::string_view text, bool final) {
  if (in_call_) return "";
  pending_ += text;
  size_t safe = pending_.size();
  if (!marker_.empty()) {
    if (const size_t at = pending_.find(marker_); at != std::string::npos) {
      safe = at;
      in_call_ = true;
    } else if (!final) {
      safe -= partial_at_end(pending_, marker_);
    }
    while (safe > 0 && blank(pending_[safe - 1])) --safe;  // the parsed content is trimmed
  }
  std::string_view out(pending_.data(), safe);
  if (!started_) {  // the model's spacing before the reply (the parsed content is trimmed)
    size_t b = 0;
    while (b < out.size() && blank(out[b])) ++b;
    if (b == out.size()) {
      pending_.erase(0, safe);
      return "";
    }
    out.remove_prefix(b);
    started_ = true;
  }
  std::string chunk;
  if (!out.empty()) {
    streamed_ += out;
    chunk = sse(chat_chunk(meta_, {{"content", std::string(out)}}, nullptr, lp_.next()));
  }
  pending_.erase(0, safe);
  if (in_call_) pending_.clear();
  return chunk;
}

std::string ChatStreamer::push(std::string_view text) {
  std::string out;
  for (const ReasoningStream::Piece& piece : split_.push(text)) {
    if (!piece.reasoning) {
      out += content(piece.text, false);
      continue;
    }
    std::string_view t = piece.text;
    if (!thinking_) {
      size_t b = 0;
      while (b < t.size() && blank(t[b])) ++b;
      if (b == t.size()) continue;
      t.remove_prefix(b);
      thinking_ = true;
    }
    out += sse(chat_chunk(meta_, {{"reasoning_content", std::string(t)}}, nullptr));
  }
  return out;
}

std::string ChatStreamer::end(const ChatReply& reply) {
  std::string out;
  for (const ReasoningStream::Piece& piece : split_.finish())
    if (!piece.reasoning) out += content(piece.text, true);
  if (!thinking_ && !reply.parsed.reasoning.empty())
    out += sse(chat_chunk(meta_, {{"reasoning_content", reply.parsed.reasoning}}, nullptr));
  json rest = lp_.rest(reply.text.size());  // the first chunk below takes them
  // The content not streamed: what the parsed content has beyond the streamed text (text
  // after the calls, a held blank run, a partial marker that was text after all).
  const std::string& c = reply.parsed.content;
  const std::string more = c.compare(0, streamed_.size(), streamed_) == 0
                               ? c.substr(streamed_.size())
                           : streamed_.empty() ? c
                                               : std::string();
  if (!more.empty())
    out += sse(chat_chunk(meta_, {{"content", more}}, nullptr, std::exchange(rest, nullptr)));
  if (!reply.parsed.tool_calls.empty())
    out += sse(chat_chunk(meta_, {{"tool_calls", tool_calls_json(reply.parsed.tool_calls)}},
                          nullptr, std::exchange(rest, nullptr)));
  if (!rest.is_null()) out += sse(chat_chunk(meta_, {{"content", ""}}, nullptr, rest));
  out += sse(chat_chunk(meta_, json::object(), openai_finish(reply.finish)));
  return out;
}

}  // namespace channel::server
