// libFuzzer target for `channel serve`'s request parsing (server/openai_request.h): a JSON
// body (byte 0 picks chat completions, completions, or a named session's messages,
// embeddings, responses and Anthropic messages; the rest is the body) either parses or is refused
// with an ApiError (a 4xx naming the field), never another exception (a 500) or a crash; what
// parses makes a valid sampler. A json_schema then checks the last message's text as a reply, piece
// by piece (JsonPrefix with a schema).
#include <cstddef>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "chat/chat_formatter.h"
#include "chat/json_prefix.h"
#include "chat/reasoning_split.h"
#include "runtime/sampler.h"
#include "server/anthropic_request.h"
#include "server/api_error.h"
#include "server/embedding_request.h"
#include "server/json_depth.h"
#include "server/openai_request.h"
#include "server/reply_stream.h"
#include "server/responses_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace channel;
  using namespace channel::server;
  if (size == 0) return 0;
  const nlohmann::json body = nlohmann::json::parse(data + 1, data + size, nullptr, false);
  if (body.is_discarded()) return 0;  // the route's parse_body: a 400 before any field
  try {
    check_json_depth(body, "the body");  // parse_body's second check
  } catch (const ApiError&) {
    return 0;
  }
  const SamplerConfig defaults;
  try {
    switch (data[0] % 3) {
      case 0: {
        const ChatRequest r = parse_chat_request(body, defaults, 256);
        check_logit_bias(r.params, 8192);
        Sampler sampler(r.params.sampling);
        {  // the last message as a reply streamed with tools offered (Hermes' marker)
          const std::string& text = r.messages.back().content;
          ReplyStream stream("<tool_call>");
          std::string content;
          const auto take = [&](const std::vector<ReplyStream::Piece>& ps) {
            for (const auto& p : ps)
              if (!p.reasoning) content += p.text;
          };
          for (size_t i = 0; i < text.size(); i += 3)
            take(stream.push(std::string_view(text).substr(i, 3)));
          take(stream.finish());
          const std::string after = split_reasoning(text).content;
          const std::string_view before =
              trim_whitespace(std::string_view(after).substr(0, after.find("<tool_call>")));
          if (content != before) __builtin_trap();  // the text before the call, no more, no less
        }
        if (r.params.json_schema) {
          JsonPrefix reply(r.params.json_schema.get());
          const std::string& text = r.messages.back().content;
          for (size_t i = 0; i < text.size(); i += 3)
            reply.push(std::string_view(text).substr(i, 3));
          (void)reply.complete();
        }
        break;
      }
      case 1: {
        const CompletionRequest r = parse_completion_request(body, defaults, 256);
        check_logit_bias(r.params, 8192);
        Sampler sampler(r.params.sampling);
        break;
      }
      default: {
        try {
          const EmbeddingRequest r = parse_embedding_request(body);
          if (r.inputs.empty() || r.inputs.size() > kMaxEmbeddingInputs) __builtin_trap();
          for (const EmbeddingInput& in : r.inputs)
            if (in.is_text ? in.text.empty() : in.ids.empty()) __builtin_trap();
        } catch (const ApiError& e) {
          if (e.status < 400 || e.status >= 500) __builtin_trap();
        }
        try {  // a Responses body, continuing a conversation of one assistant call
          const nlohmann::json previous = nlohmann::json::parse(
              R"([{"role": "user", "content": "hi"}, {"role": "assistant", "content": null,
                  "tool_calls": [{"id": "call_1", "type": "function",
                                  "function": {"name": "f", "arguments": "{}"}}]}])");
          const ResponsesRequest r = parse_responses_request(body, previous, defaults, 256);
          Sampler sampler(r.chat.params.sampling);
          if (r.chat.messages.empty()) __builtin_trap();
        } catch (const ApiError& e) {
          if (e.status < 400 || e.status >= 500) __builtin_trap();
        }
        try {  // an Anthropic Messages body
          const ChatRequest r = parse_anthropic_request(body, defaults, 256);
          Sampler sampler(r.params.sampling);
          if (r.messages.empty()) __builtin_trap();
        } catch (const ApiError& e) {
          if (e.status < 400 || e.status >= 500) __builtin_trap();
        }
        if (body.is_object() && body.contains("messages")) parse_messages(body["messages"]);
        break;
      }
    }
  } catch (const ApiError& e) {
    if (e.status < 400 || e.status >= 500) __builtin_trap();
  }
  return 0;
}
