// ChatML (<|im_start|>role\n...<|im_end|>\n), as Qwen2.5 writes it: tools are listed in the
// system turn inside <tools></tools>, a call is Hermes-style <tool_call>{"name", "arguments"}
// </tool_call>, and consecutive tool results share one user turn of <tool_response> blocks.
// qwen2.5 adds its default system prompt when the conversation has none; plain chatml none.
#include "chat/formatters.h"
#include "chat/python_json.h"

namespace channel {
namespace {

class ChatmlFormatter final : public ChatFormatter {
 public:
  explicit ChatmlFormatter(ChatTemplateSpec spec) : ChatFormatter(std::move(spec)) {}

  void open(const std::optional<std::string>& system, std::span<const ToolSpec> tools,
            ChatOutput& out) override {
    const std::string content = system.value_or(spec_.chatml_default_system);
    if (!tools.empty()) {
      std::string s = "<|im_start|>system\n" + content + (content.empty() ? "" : "\n\n") +
                      "# Tools\n\nYou may call one or more functions to assist with the user "
                      "query.\n\nYou are provided with function signatures within <tools></tools> "
                      "XML tags:\n<tools>";
      for (const ToolSpec& t : tools) {
        s += '\n';
        s += python_json_dumps(t.to_openai_json());
      }
      s += "\n</tools>\n\nFor each function call, return a json object with function name and "
           "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
           "<function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n";
      out.add(SpanType::system, s);
    } else if (system || !content.empty()) {
      out.add(SpanType::system, "<|im_start|>system\n" + content + "<|im_end|>\n");
    }
  }

  void add(const ChatMessage& m, ChatOutput& out) override {
    if (m.role == ChatRole::tool) {
      out.add(SpanType::tool_result, in_tool_turn_ ? "" : "<|im_start|>user");
      in_tool_turn_ = true;
      out.add(SpanType::tool_result, "\n<tool_response>\n" + m.content + "\n</tool_response>");
      return;
    }
    close(out);
    const std::string role = chat_role_name(m.role);
    if (m.role == ChatRole::assistant) {
      if (m.tool_calls.empty()) {
        out.add(SpanType::response_sentence, "<|im_start|>assistant\n");
        out.add(SpanType::response_sentence, m.content + "<|im_end|>\n");
        return;
      }
      out.add(SpanType::response_sentence, "<|im_start|>assistant");
      if (!m.content.empty()) out.add(SpanType::response_sentence, "\n" + m.content);
      for (const ToolCall& c : m.tool_calls) {
        out.add(SpanType::tool_call, "\n<tool_call>\n{\"name\": \"" + c.name +
                                         "\", \"arguments\": " + python_json_dumps(c.arguments) +
                                         "}\n</tool_call>");
      }
      out.add(SpanType::tool_call, "<|im_end|>\n");
      return;
    }
    out.add(SpanType::user, "<|im_start|>" + role + "\n" + m.content + "<|im_end|>\n");
  }

  void generation_prompt(ChatOutput& out) override {
    close(out);
    out.add(SpanType::response_sentence, "<|im_start|>assistant\n");
  }

  std::string end_generated_reply() override { return "\n"; }

  std::string end_of_turn() const override { return "<|im_end|>"; }
  std::string tool_call_opener(const std::string& name) const override {
    return "<tool_call>\n{\"name\": \"" + (name.empty() ? std::string() : name + "\", \"arguments\": ");
  }
  std::optional<std::string> tool_call_closer() const override { return "}\n</tool_call>"; }
  void resume_after_reply() override { in_tool_turn_ = false; }

  void close(ChatOutput& out) override {
    if (!in_tool_turn_) return;
    out.add(SpanType::tool_result, "<|im_end|>\n");
    in_tool_turn_ = false;
  }

 private:
  bool in_tool_turn_ = false;
};

}  // namespace

std::unique_ptr<ChatFormatter> make_chatml_formatter(const ChatTemplateSpec& spec) {
  return std::make_unique<ChatmlFormatter>(spec);
}

}  // namespace channel
