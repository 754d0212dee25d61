// Splitting a reply's reasoning from its answer (reasoning_split.h).
#include "chat/reasoning_split.h"

#include <algorithm>

#include "chat/chat_formatter.h"

namespace channel {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

}  // namespace

bool is_blank(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\f' || c == '\v';
}

size_t partial_tag_at_end(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

SplitReply split_reasoning(std::string_view reply) {
  size_t b = 0;
  while (b < reply.size() && is_blank(reply[b])) ++b;
  if (reply.substr(b, kOpen.size()) != kOpen) return {"", std::string(reply)};
  const std::string_view rest = reply.substr(b + kOpen.size());
  const size_t close = rest.find(kClose);
  if (close == std::string_view::npos) return {std::string(trim_whitespace(rest)), ""};
  return {std::string(trim_whitespace(rest.substr(0, close))),
          std::string(rest.substr(close + kClose.size()))};
}

std::vector<ReasoningStream::Piece> ReasoningStream::push(std::string_view text) {
  std::vector<Piece> out;
  held_ += text;
  for (;;) {
    if (state_ == State::start) {
      size_t b = 0;
      while (b < held_.size() && is_blank(held_[b])) ++b;
      const std::string_view s = std::string_view(held_).substr(b);
      if (s.size() < kOpen.size() && kOpen.substr(0, s.size()) == s) return out;  // undecided
      if (s.substr(0, kOpen.size()) == kOpen) {
        state_ = State::reasoning;
        held_.erase(0, b + kOpen.size());
        continue;
      }
      state_ = State::content;  // no block: everything is content, as written
    }
    if (state_ == State::content) {
      if (!held_.empty()) out.push_back({false, std::move(held_)});
      held_.clear();
      return out;
    }
    // Reasoning: up to </think>, keeping back what may be its start.
    const size_t close = held_.find(kClose);
    if (close != std::string::npos) {
      if (close > 0) out.push_back({true, held_.substr(0, close)});
      held_.erase(0, close + kClose.size());
      state_ = State::content;
      continue;
    }
    const size_t keep = partial_tag_at_end(held_, kClose);
    if (held_.size() > keep) out.push_back({true, held_.substr(0, held_.size() - keep)});
    held_.erase(0, held_.size() - keep);
    return out;
  }
}

std::vector<ReasoningStream::Piece> ReasoningStream::finish() {
  std::vector<Piece> out;
  if (!held_.empty()) out.push_back({state_ == State::reasoning, std::move(held_)});
  held_.clear();
  return out;
}

}  // namespace channel
