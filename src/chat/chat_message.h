// The conversation as the chat layer sees it: messages in the OpenAI shape (role, content,
// tool calls, tool results) and the tools a system prompt offers. Arguments and parameter
// schemas are ordered JSON so that rendering keeps the key order the caller wrote, as
// Python's json.dumps does for the reference templates.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace channel {

using OrderedJson = nlohmann::ordered_json;

struct ToolCall {
  std::string id;          // the OpenAI call id ("call_..."); not rendered by any template
  std::string name;
  OrderedJson arguments = OrderedJson::object();
  bool operator==(const ToolCall&) const = default;
};

// One tool a model may call: a name, what it does and a JSON schema of its parameters.
struct ToolSpec {
  std::string name;
  std::string description;
  OrderedJson parameters = OrderedJson::object();
  // The OpenAI shape {"type": "function", "function": {...}}, as templates render it.
  OrderedJson to_openai_json() const;
  bool operator==(const ToolSpec&) const = default;
};

enum class ChatRole : uint8_t { system, user, assistant, tool };

const char* chat_role_name(ChatRole role);

struct ChatMessage {
  ChatRole role = ChatRole::user;
  std::string content;
  std::vector<ToolCall> tool_calls;  // assistant only
  std::string tool_call_id;          // tool only: the call this result answers
  std::string name;                  // tool only: the tool's name, when known
};

}  // namespace channel
