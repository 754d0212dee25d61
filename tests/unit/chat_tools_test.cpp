// System prompt files with YAML front matter (tools) and the per-family tool call parsers.
#include <gtest/gtest.h>

#include "chat/chat_formatter.h"
#include "chat/python_json.h"
#include "chat/system_prompt.h"
#include "chat/tool_call_parser.h"
#include "util/error.h"

namespace channel {
namespace {

constexpr const char* kPrompt = R"(---
tools:
  - name: get_weather
    description: Current weather in a city.
    parameters:
      type: object
      properties:
        city: {type: string, description: "City name"}
        days: {type: integer}
        metric: {type: boolean}
      required: [city]
  - name: now
    description: The time.
---

You are a helpful assistant.
Be brief.
)";

TEST(SystemPrompt, ReadsToolsAndText) {
  const SystemPrompt sp = parse_system_prompt(kPrompt, "p.md");
  EXPECT_EQ(sp.text, "You are a helpful assistant.\nBe brief.");
  ASSERT_EQ(sp.tools.size(), 2u);
  EXPECT_EQ(sp.tools[0].name, "get_weather");
  EXPECT_EQ(sp.tools[0].description, "Current weather in a city.");
  EXPECT_EQ(python_json_dumps(sp.tools[0].parameters),
            R"({"type": "object", "properties": {"city": {"type": "string", "description": "City name"}, "days": {"type": "integer"}, "metric": {"type": "boolean"}}, "required": ["city"]})");
  EXPECT_EQ(sp.tools[1].name, "now");
  EXPECT_EQ(python_json_dumps(sp.tools[1].parameters), R"({"type": "object", "properties": {}})");
}

TEST(SystemPrompt, PlainTextHasNoTools) {
  const SystemPrompt sp = parse_system_prompt("  Just text.\n--- not front matter\n", "p");
  EXPECT_EQ(sp.text, "Just text.\n--- not front matter");
  EXPECT_TRUE(sp.tools.empty());
  EXPECT_TRUE(parse_system_prompt("---\n---\nBody", "p").tools.empty());
  EXPECT_EQ(parse_system_prompt("---\r\ntools: []\r\n---\r\nBody\r\n", "p").text, "Body");
}

std::string error_of(const std::string& text) {
  try {
    parse_system_prompt(text, "sys.md");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SystemPrompt, ErrorsNameTheLine) {
  EXPECT_EQ(error_of("---\ntools:\n  - description: x\n---\n"), "sys.md:3: a tool without a name");
  EXPECT_EQ(error_of("---\ntools:\n  - name: a\n    parameters: {type: object, properties: "
                     "{x: {type: strin}}}\n---\n"),
            "sys.md:4: parameters are not a JSON schema: parameters.properties.x.type is not one "
            "of object, array, string, number, integer, boolean, null");
  EXPECT_EQ(error_of("---\ntools:\n  - name: a\n    parameters: [1, 2]\n---\n"),
            "sys.md:4: parameters are not a JSON schema: parameters must be a mapping (an "
            "object schema)");
  EXPECT_EQ(error_of("---\ntools:\n  - name: a\n    parameters:\n      type: object\n      "
                     "required: [b]\n      properties: {a: {type: string}}\n---\n"),
            "sys.md:5: parameters are not a JSON schema: parameters.required names 'b', which "
            "is not a property");
  const std::string bad_yaml = error_of("---\ntools:\n  - name: [unclosed\n---\n");
  EXPECT_EQ(bad_yaml.rfind("sys.md:", 0), 0u) << bad_yaml;
  EXPECT_NE(bad_yaml.find("bad YAML"), std::string::npos) << bad_yaml;
  EXPECT_EQ(error_of("---\ntools: []\nmodel: x\n---\n"), "sys.md:3: unknown front matter key 'model' (tools)");
  EXPECT_EQ(error_of("---\ntools:\n  - name: a\n  - name: a\n---\n"), "sys.md:4: tool 'a' is defined twice");
  EXPECT_EQ(error_of("---\ntools:\n  - name: a\n    colour: red\n---\n"),
            "sys.md:4: unknown tool key 'colour' (name, description, parameters)");
  EXPECT_EQ(error_of("---\ntools: [1]\n"), "sys.md:1: front matter opened with --- is never closed by a --- line");
  EXPECT_EQ(error_of("---\ntools:\n  - name: \"9 lives\"\n---\n").substr(0, 9), "sys.md:3:");
  EXPECT_EQ(error_of("---\n- a\n---\n"), "sys.md:2: front matter must be a mapping (tools: ...)");
  EXPECT_THROW(read_system_prompt_file("/nonexistent/prompt.md"), Error);
}

std::vector<ToolSpec> tools() { return parse_system_prompt(kPrompt, "p").tools; }

// What a formatter renders for a call parses back into the same call, in every family.
TEST(ToolCallParser, RoundTripsWhatTheTemplateRenders) {
  const ToolCall call{"", "get_weather",
                      OrderedJson::parse(R"({"city": "Saint-Étienne", "days": 3, "metric": true,
                                              "note": "a \"quoted\" word", "list": [1.5, null]})")};
  for (const char* name : {"gemma3", "llama3.1", "qwen2.5", "channel", "mistral"}) {
    SCOPED_TRACE(name);
    const ChatTemplateSpec spec = chat_template_by_name(name, "");
    auto f = make_chat_formatter(spec);
    ChatOutput out;
    f->open(std::nullopt, {}, out);
    ChatMessage u;
    u.content = "hi";
    f->add(u, out);
    ChatMessage a;
    a.role = ChatRole::assistant;
    a.tool_calls = {call};
    ChatOutput reply;
    f->add(a, reply);
    // What the model generates: the turn without its header and end marker.
    std::string text = reply.text();
    ChatOutput prompt;
    make_chat_formatter(spec)->generation_prompt(prompt);
    std::string header = prompt.text();
    if (spec.family == ChatFamily::chatml) header.pop_back();  // "<|im_start|>assistant" + "\n<tool_call>"
    if (spec.family == ChatFamily::channel) header.clear();
    ASSERT_EQ(text.substr(0, header.size()), header);
    text = text.substr(header.size());
    for (const char* end : {"<|eot_id|>", "<end_of_turn>\n", "<|im_end|>\n", "</s>"}) {
      const std::string e = end;
      if (text.size() >= e.size() && text.substr(text.size() - e.size()) == e) text.resize(text.size() - e.size());
    }
    const ParsedReply r = parse_tool_calls(spec.family, text, tools());
    ASSERT_EQ(r.tool_calls.size(), 1u) << text;
    EXPECT_EQ(r.tool_calls[0].name, "get_weather");
    EXPECT_EQ(r.tool_calls[0].arguments, call.arguments);
    EXPECT_EQ(r.tool_calls[0].id, "call_0");
  }
}

TEST(ToolCallParser, Hermes) {
  const ParsedReply r = parse_tool_calls(
      ChatFamily::chatml,
      "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n"
      "</tool_call>\n<tool_call>{\"name\": \"now\", \"arguments\": \"{}\"}</tool_call>",
      tools());
  EXPECT_EQ(r.content, "Sure.");
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0].arguments["city"], "Oslo");
  EXPECT_EQ(r.tool_calls[1].name, "now");
  EXPECT_EQ(r.tool_calls[1].id, "call_1");
  // Unknown tools, bad JSON and an unclosed block stay text.
  const ParsedReply bad = parse_tool_calls(
      ChatFamily::chatml, "<tool_call>{\"name\": \"rm\"}</tool_call> <tool_call>{oops</tool_call> <tool_call>{", tools());
  EXPECT_TRUE(bad.tool_calls.empty());
  EXPECT_EQ(bad.content, "<tool_call>{\"name\": \"rm\"}</tool_call> <tool_call>{oops</tool_call> <tool_call>{");
}

TEST(ToolCallParser, MistralToolCalls) {
  const ParsedReply r =
      parse_tool_calls(ChatFamily::inst,
                       "Looking. [TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": "
                       "{\"city\": \"Oslo\"}, \"id\": \"x1y2z3w4v\"}, "
                       "{\"name\": \"now\", \"arguments\": {}}]</s>",
                       tools());
  EXPECT_EQ(r.content, "Looking.");
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0].arguments["city"], "Oslo");
  EXPECT_EQ(r.tool_calls[1].name, "now");
  EXPECT_EQ(r.tool_calls[1].id, "call_1");
  // An unknown tool or a list that does not parse leaves the whole reply as text.
  for (const char* bad : {"[TOOL_CALLS] [{\"name\": \"rm\", \"arguments\": {}}]",
                          "[TOOL_CALLS] [{oops", "[TOOL_CALLS] []"}) {
    const ParsedReply b = parse_tool_calls(ChatFamily::inst, bad, tools());
    EXPECT_TRUE(b.tool_calls.empty()) << bad;
    EXPECT_EQ(b.content, bad);
  }
  EXPECT_EQ(parse_tool_calls(ChatFamily::inst, "  Plain answer. ", tools()).content,
            "Plain answer.");
}

TEST(ToolCallParser, Llama3Json) {
  ParsedReply r = parse_tool_calls(
      ChatFamily::llama3, "<|python_tag|>{\"name\": \"now\", \"parameters\": {}}", tools());
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.content, "");
  r = parse_tool_calls(ChatFamily::llama3, "The answer is {\"name\": \"now\"}", tools());
  EXPECT_TRUE(r.tool_calls.empty());
  EXPECT_EQ(r.content, "The answer is {\"name\": \"now\"}");
}

TEST(ToolCallParser, GemmaToolCode) {
  const ParsedReply r = parse_tool_calls(
      ChatFamily::gemma3,
      "Checking.\n```tool_code\nget_weather(city='Rome', days=2, metric=False, extra={'a': [1, (2, 3)]})\n```",
      tools());
  EXPECT_EQ(r.content, "Checking.");
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(python_json_dumps(r.tool_calls[0].arguments),
            R"({"city": "Rome", "days": 2, "metric": false, "extra": {"a": [1, [2, 3]]}})");
  ToolCall c;
  EXPECT_FALSE(parse_python_call("get_weather(city=)", c));
  EXPECT_FALSE(parse_python_call("get_weather(1)", c));
  EXPECT_FALSE(parse_python_call("os.system('x'); y()", c));
  EXPECT_TRUE(parse_python_call(" now() ", c));
}

TEST(ToolCallParser, ChannelLines) {
  const ParsedReply r = parse_tool_calls(
      ChatFamily::channel, " I will look.\nAnswer: Call: get_weather {\"city\": \"Lima\"}\nCall: now {}", tools());
  EXPECT_EQ(r.content, "I will look.");
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0].arguments["city"], "Lima");
}

}  // namespace
}  // namespace channel
