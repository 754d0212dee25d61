// Tool calls in a model's reply, parsed per family into structured calls:
//   llama3   the whole reply is {"name": ..., "parameters": {...}} (optionally after
//            <|python_tag|>); "arguments" is accepted for "parameters"
//   chatml   Hermes-style <tool_call>{"name": ..., "arguments": {...}}</tool_call> blocks
//   gemma3   ```tool_code``` blocks holding name(key=value, ...) Python calls (or the JSON
//            object form)
//   channel  "Call: name {json}" lines
//   inst     [TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...] after any text (Mistral)
// What is not a well-formed call stays text: a reply is never lost to a parse error.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_formatter.h"
#include "chat/chat_message.h"

namespace channel {

struct ParsedReply {
  std::string content;              // the reply without its tool calls, trimmed
  std::vector<ToolCall> tool_calls;  // ids are "call_<n>" in order
  std::string reasoning;             // a leading <think> block's text (reasoning_split.h)
};

// `tools`: when not empty, a call to a name not among them stays text.
ParsedReply parse_tool_calls(ChatFamily family, std::string_view reply,
                             std::span<const ToolSpec> tools = {});

// A Python call `name(k=v, ...)` with literal arguments (strings, numbers, True/False/None,
// lists, dicts) as a ToolCall; false when `text` is not one.
bool parse_python_call(std::string_view text, ToolCall& call);

}  // namespace channel
