// The request body of /v1/messages (Anthropic's Messages API), read as the chat completion it
// amounts to: `system` (a string or text blocks) is the system message; `messages` of text,
// tool_use and tool_result blocks the conversation; `tools` ({name, description,
// input_schema}) and `tool_choice` (auto, any, tool, none) the chat form's; `max_tokens`,
// `stop_sequences`, `temperature`, `top_p`, `top_k`, `stream`. A wrong type or value is a
// 400 naming the Messages field.
#pragma once

#include <nlohmann/json.hpp>

#include "runtime/sampler.h"
#include "server/openai_request.h"

namespace channel::server {

ChatRequest parse_anthropic_request(const nlohmann::json& body, const SamplerConfig& defaults,
                                    int default_max_tokens);

}  // namespace channel::server
