// Channel's own models are trained on plain English text, with one dialogue shape in it: the
// recall task's "Question: ...\nAnswer: ..." lines (docs/models.md). Their template uses that
// shape: the system prompt as a paragraph, a user turn as a Question line, a reply as an
// Answer line that ends at the end of its line, tool calls as "Answer: Call: name {json}"
// lines and results as "Result: ..." lines. The same format as Jinja is
// tests/data/chat_templates/channel.jinja, which the test renders to prove this file.
#include "chat/formatters.h"
#include "chat/python_json.h"

namespace channel {
namespace {

std::string one_line(std::string_view s) {
  std::string out(trim_whitespace(s));
  for (char& c : out) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return out;
}

class ChannelFormatter final : public ChatFormatter {
 public:
  explicit ChannelFormatter(ChatTemplateSpec spec) : ChatFormatter(std::move(spec)) {}

  void open(const std::optional<std::string>& system, std::span<const ToolSpec> tools,
            ChatOutput& out) override {
    std::string s = spec_.bos_token;
    const std::string text(trim_whitespace(system.value_or("")));
    s += text;
    if (!tools.empty()) {
      s += std::string(text.empty() ? "" : "\n\n") + "Tools:\n";
      for (const ToolSpec& t : tools) {
        s += "- " + t.name + ": " + one_line(t.description) +
             " Parameters: " + python_json_dumps(t.parameters) + "\n";
      }
      s += "To use a tool, answer with: Call: name {arguments as JSON}";
    }
    if (!text.empty() || !tools.empty()) s += "\n\n";
    out.add(SpanType::system, s);
  }

  void add(const ChatMessage& m, ChatOutput& out) override {
    switch (m.role) {
      case ChatRole::system:
      case ChatRole::user:
        out.add(SpanType::user, "Question: " + one_line(m.content) + "\n");
        break;
      case ChatRole::assistant:
        if (!m.content.empty() || m.tool_calls.empty())
          out.add(SpanType::response_sentence, "Answer: " + one_line(m.content) + "\n");
        for (const ToolCall& c : m.tool_calls)
          out.add(SpanType::tool_call,
                  "Answer: Call: " + c.name + " " + python_json_dumps(c.arguments) + "\n");
        break;
      case ChatRole::tool:
        out.add(SpanType::tool_result, "Result: " + one_line(m.content) + "\n");
        break;
    }
  }

  void generation_prompt(ChatOutput& out) override {
    out.add(SpanType::response_sentence, "Answer:");
  }

  // The reply ends at its newline, which the model generated itself.
  std::string end_generated_reply() override { return ""; }
  std::string end_of_turn() const override { return "\n"; }
  std::string tool_call_opener(const std::string& name) const override {
    return " Call: " + (name.empty() ? std::string() : name + " ");
  }
  std::optional<std::string> tool_call_closer() const override { return ""; }
  void resume_after_reply() override {}
  std::vector<std::string> stop_strings() const override { return {"\n"}; }
};

}  // namespace

std::unique_ptr<ChatFormatter> make_channel_formatter(const ChatTemplateSpec& spec) {
  return std::make_unique<ChannelFormatter>(spec);
}

}  // namespace channel
