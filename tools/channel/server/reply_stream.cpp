// Handing out a reply as it is generated (reply_stream.h).
#include "server/reply_stream.h"

namespace channel::server {

void ReplyStream::content(std::string_view text, bool final, std::vector<Piece>& out) {
  if (in_call_) return;
  pending_ += text;
  size_t safe = pending_.size();
  if (!marker_.empty()) {
    if (const size_t at = pending_.find(marker_); at != std::string::npos) {
      safe = at;
      in_call_ = true;
    } else if (!final) {
      safe -= partial_tag_at_end(pending_, marker_);
    }
  }
  while (safe > 0 && is_blank(pending_[safe - 1])) --safe;  // held, or dropped at the end
  std::string_view ready(pending_.data(), safe);
  size_t b = 0;
  if (!started_)
    while (b < ready.size() && is_blank(ready[b])) ++b;
  if (b < ready.size()) {
    started_ = true;
    out.push_back({false, std::string(ready.substr(b))});
    streamed_ += out.back().text;
  }
  pending_.erase(0, safe);
  if (in_call_) pending_.clear();
}

std::vector<ReplyStream::Piece> ReplyStream::push(std::string_view text) {
  std::vector<Piece> out;
  for (ReasoningStream::Piece& piece : split_.push(text)) {
    if (!piece.reasoning) {
      content(piece.text, false, out);
      continue;
    }
    std::string_view t = piece.text;
    if (!thinking_) {
      size_t b = 0;
      while (b < t.size() && is_blank(t[b])) ++b;
      if (b == t.size()) continue;
      t.remove_prefix(b);
      thinking_ = true;
    }
    out.push_back({true, std::string(t)});
  }
  return out;
}

std::vector<ReplyStream::Piece> ReplyStream::finish() {
  std::vector<Piece> out;
  for (ReasoningStream::Piece& piece : split_.finish())
    if (!piece.reasoning) content(piece.text, false, out);
  content("", true, out);
  return out;
}

std::string ReplyStream::rest_of(const std::string& parsed) const {
  if (parsed.compare(0, streamed_.size(), streamed_) == 0) return parsed.substr(streamed_.size());
  return streamed_.empty() ? parsed : std::string();
}

}  // namespace channel::server
