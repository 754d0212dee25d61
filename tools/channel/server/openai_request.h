// Request bodies of /v1/chat/completions and /v1/completions, parsed and checked field by
// field: a wrong type or an out-of-range value is a 400 naming the field.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_message.h"
#include "runtime/sampler.h"

namespace channel::server {

enum class ToolChoice : uint8_t { none, auto_, required, named };

struct GenerationParams {
  std::string model;
  bool stream = false;
  bool include_usage = false;   // stream_options.include_usage
  int max_tokens = 256;
  std::vector<std::string> stop;
  SamplerConfig sampling;        // temperature, top_p, seed over the server's defaults
  bool json_object = false;      // response_format {"type": "json_object"} or json_schema
  std::shared_ptr<const OrderedJson> json_schema;  // response_format json_schema's schema
  // Each sampled token's log-probability and this many alternatives; -1: none. Chat:
  // logprobs true with top_logprobs (0..20); completions: logprobs (0..5).
  int logprobs = -1;
};

struct ChatRequest {
  GenerationParams params;
  std::vector<ChatMessage> messages;  // system first when given
  std::vector<ToolSpec> tools;
  ToolChoice tool_choice = ToolChoice::auto_;
  std::string tool_name;  // ToolChoice::named
};

struct CompletionRequest {
  GenerationParams params;  // max_tokens may be 0 here: the prompt alone (echo, logprobs)
  std::string prompt;
  // The prompt given as token ids (run as they are, no BOS added) instead of text.
  bool prompt_is_ids = false;
  std::vector<int32_t> prompt_ids;
  bool echo = false;
};

// `defaults`: the server's sampler (what a request does not set).
ChatRequest parse_chat_request(const nlohmann::json& body, const SamplerConfig& defaults,
                               int default_max_tokens);
CompletionRequest parse_completion_request(const nlohmann::json& body,
                                           const SamplerConfig& defaults, int default_max_tokens);
// The parts a named-session message request takes: messages (user / tool results) only.
std::vector<ChatMessage> parse_messages(const nlohmann::json& messages);
std::vector<ToolSpec> parse_tools(const nlohmann::json& tools);
// A 400 naming logit_bias.ID for a token id outside the model's vocabulary.
void check_logit_bias(const GenerationParams& params, int32_t n_vocab);

}  // namespace channel::server
