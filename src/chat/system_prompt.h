// A system prompt file: plain text, optionally opened by YAML front matter that defines the
// tools the model may call:
//
//   ---
//   tools:
//     - name: get_weather
//       description: Current weather in a city.
//       parameters:            # a JSON schema of the arguments, written in YAML
//         type: object
//         properties:
//           city: {type: string}
//         required: [city]
//   ---
//   You are a helpful assistant.
//
// The text and the tools are rendered with the chat template and prefilled into the anchors
// (tier 1) at cold boot, where they never leave.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_message.h"

namespace channel {

struct SystemPrompt {
  std::string text;              // the body after the front matter, trimmed
  std::vector<ToolSpec> tools;   // in file order
};

// Parses `content`; `source` names it in errors. Throws channel::Error with one line that
// names the source and line: bad YAML, a tool without a name, parameters that are not a JSON
// schema, an unknown key, a repeated tool name.
SystemPrompt parse_system_prompt(std::string_view content, std::string_view source);
SystemPrompt read_system_prompt_file(const std::string& path);

// Checks that `schema` is a JSON schema of a tool's parameters: an object schema whose
// properties are schemas with known types. Returns "" or what is wrong, naming the path.
std::string json_schema_problem(const OrderedJson& schema);

}  // namespace channel
