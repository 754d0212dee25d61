// The request body of /v1/responses (OpenAI's Responses API), read as the chat completion it
// amounts to: `instructions` and system/developer items become the system message, `input`
// (a string, or message, function_call and function_call_output items) the conversation,
// flat function `tools` the chat form's, `text.format` the response_format, and
// `max_output_tokens` max_tokens. A wrong type or value is a 400 naming the Responses field.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "runtime/sampler.h"
#include "server/openai_request.h"

namespace channel::server {

struct ResponsesRequest {
  ChatRequest chat;
  // The conversation without its system message, as chat messages: what a later request's
  // previous_response_id continues (with this response's output appended).
  nlohmann::json conversation = nlohmann::json::array();
  std::string instructions;  // "" when none
  std::string previous_response_id;
  bool store = true;
  nlohmann::json metadata = nlohmann::json::object();
  // Echoed in the response object as the request gave them.
  nlohmann::json tools = nlohmann::json::array();
  nlohmann::json tool_choice = "auto";
  nlohmann::json text = {{"format", {{"type", "text"}}}};
  nlohmann::json max_output_tokens = nullptr;
};

// The id of the response whose conversation the body continues, or "" (checked: a string).
std::string previous_response_id(const nlohmann::json& body);

// `previous`: that response's conversation (chat messages), put before this input.
ResponsesRequest parse_responses_request(const nlohmann::json& body, const nlohmann::json& previous,
                                         const SamplerConfig& defaults, int default_max_tokens);

}  // namespace channel::server
