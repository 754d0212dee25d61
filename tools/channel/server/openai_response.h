// Response bodies in OpenAI's shapes: chat.completion, chat.completion.chunk (SSE),
// text_completion, and the SSE framing ("data: {...}\n\n", "data: [DONE]\n\n").
#pragma once

#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/chat_session.h"
#include "chat/generation_loop.h"
#include "tokenizer/tokenizer.h"

namespace channel::server {

struct ResponseMeta {
  std::string id;  // chatcmpl-... / cmpl-...
  int64_t created = 0;
  std::string model;
  uint64_t prompt_tokens = 0;
};

ResponseMeta new_meta(const std::string& prefix, const std::string& model);
// A fresh id in OpenAI's and Anthropic's item style, prefix_hex ("msg_...", "call_...").
std::string new_item_id(const char* prefix);
nlohmann::json usage_json(uint64_t prompt_tokens, uint64_t completion_tokens);
nlohmann::json tool_calls_json(const std::vector<ToolCall>& calls);
std::string openai_finish(FinishReason finish);  // "stop", "length", "tool_calls"
nlohmann::json chat_completion(const ResponseMeta& m, const ChatReply& reply,
                               const nlohmann::json& logprobs = nullptr);
nlohmann::json chat_chunk(const ResponseMeta& m, const nlohmann::json& delta,
                          const nlohmann::json& finish_reason,
                          const nlohmann::json& logprobs = nullptr);
// A chat choice's logprobs, {"content": [{"token", "logprob", "bytes", "top_logprobs"}],
// "refusal": null}, of the entries whose text begins before text_end (the tokens of a stop
// string cut off are left out). The token strings are the vocabulary's pieces.
nlohmann::json chat_logprobs(const Tokenizer& tok, std::span<const ReplyLogprob> entries,
                             size_t text_end);
// A text_completion choice's logprobs, {"tokens", "token_logprobs", "top_logprobs": [{piece:
// logprob}], "text_offset"}, of the same entries; offsets from `base` (an echoed prompt).
nlohmann::json completion_logprobs(const Tokenizer& tok, std::span<const ReplyLogprob> entries,
                                   size_t text_end, size_t base);
// The same arrays for an echoed prompt's tokens ids[first..] (an added BOS is run, not
// echoed): offsets from 0; the prompt's first token has no context (scores[0]), so its
// logprob and alternatives are null (OpenAI's legacy echo).
nlohmann::json prompt_completion_logprobs(const Tokenizer& tok, std::span<const int32_t> ids,
                                          std::span<const StepLogprobs> scores, size_t first);
// a's arrays followed by b's (b null: a as it is).
nlohmann::json joined_completion_logprobs(nlohmann::json a, const nlohmann::json& b);
// A streamed reply's logprobs (chat or completions form), handed out chunk by chunk: each
// chunk carries the tokens whose text begins before the end of what was streamed so far.
// Off (top < 0): every call gives null and entries() is not filled.
class StreamedLogprobs {
 public:
  // base: added to a completion's text offsets (an echoed prompt's length).
  StreamedLogprobs(const Tokenizer& tok, int top, bool chat, size_t base = 0)
      : tok_(tok), top_(top), chat_(chat), base_(base) {}
  // Where ReplyOptions::logprobs_out should point (with ReplyOptions::logprobs = top()).
  std::vector<ReplyLogprob>* entries() { return top_ >= 0 ? &entries_ : nullptr; }
  int top() const { return top_; }
  // Call with every piece of text on_text sees (before any trimming), before next().
  void emitted(size_t bytes) { emitted_ += bytes; }
  // The tokens not handed out yet whose text begins before the streamed end.
  nlohmann::json next() { return take(emitted_); }
  // Those left whose text begins before text_end (the reply's final length); null if none.
  nlohmann::json rest(size_t text_end);
  // A whole (not streamed) reply's: every token whose text begins before text_end, an empty
  // list when none; null when off.
  nlohmann::json whole(size_t text_end) { return take(text_end); }

 private:
  nlohmann::json take(size_t end);
  const Tokenizer& tok_;
  int top_;
  bool chat_;
  size_t base_;
  std::vector<ReplyLogprob> entries_;
  size_t sent_ = 0, emitted_ = 0;
};

std::string sse(const nlohmann::json& data);
// An error while an OpenAI-style stream generates: its error object (a 500's) as an event.
std::string sse_error(const std::string& message);

inline constexpr const char* kSseDone = "data: [DONE]\n\n";

}  // namespace channel::server
