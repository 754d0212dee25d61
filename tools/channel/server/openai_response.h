// Response bodies in OpenAI's shapes: chat.completion, chat.completion.chunk (SSE),
// text_completion, and the SSE framing ("data: {...}\n\n", "data: [DONE]\n\n").
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "chat/chat_session.h"

namespace channel::server {

struct ResponseMeta {
  std::string id;  // chatcmpl-... / cmpl-...
  int64_t created = 0;
  std::string model;
  uint64_t prompt_tokens = 0;
};

ResponseMeta new_meta(const std::string& prefix, const std::string& model);
nlohmann::json usage_json(uint64_t prompt_tokens, uint64_t completion_tokens);
nlohmann::json tool_calls_json(const std::vector<ToolCall>& calls);
std::string openai_finish(FinishReason finish);  // "stop", "length", "tool_calls"
nlohmann::json chat_completion(const ResponseMeta& m, const ChatReply& reply);
nlohmann::json chat_chunk(const ResponseMeta& m, const nlohmann::json& delta,
                          const nlohmann::json& finish_reason);
std::string sse(const nlohmann::json& data);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";

}  // namespace channel::server
