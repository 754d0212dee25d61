// Gemma 3: the template of google/gemma-3-*-it. The system prompt is folded into the first
// user turn; roles must alternate user / model. The template itself knows no tools, so
// Channel follows Google's function-calling convention: tools are described in the system
// text, a call is a Python call in a ```tool_code``` block of the model turn, and results
// come back in ```tool_output``` blocks of the next user turn (consecutive results merged).
#include "chat/formatters.h"
#include "chat/python_json.h"
#include "util/error.h"

namespace channel {
namespace {

std::string gemma_tool_preamble(std::span<const ToolSpec> tools) {
  std::string s =
      "You can call these functions. To call one, write a Python call in a ```tool_code``` "
      "block, for example:\n```tool_code\nname(argument=value)\n```\nEach result comes back in "
      "a ```tool_output``` block.\n";
  for (const ToolSpec& t : tools) {
    s += '\n';
    s += python_json_dumps(t.to_openai_json()["function"]);
  }
  return s;
}

// name(key="value", n=3): keyword arguments with JSON literal values.
std::string gemma_tool_code(const ToolCall& call) {
  std::string s = "```tool_code\n" + call.name + "(";
  bool first = true;
  if (call.arguments.is_object()) {
    for (auto it = call.arguments.begin(); it != call.arguments.end(); ++it) {
      if (!first) s += ", ";
      first = false;
      s += it.key() + "=" + python_json_dumps(it.value());
    }
  }
  return s + ")\n```";
}

class Gemma3Formatter final : public ChatFormatter {
 public:
  explicit Gemma3Formatter(ChatTemplateSpec spec) : ChatFormatter(std::move(spec)) {}

  void open(const std::optional<std::string>& system, std::span<const ToolSpec> tools,
            ChatOutput& out) override {
    out.add(SpanType::system, spec_.bos_token);
    if (!system && tools.empty()) return;
    std::string content = system.value_or("");
    if (!tools.empty()) content = (system ? content + "\n\n" : "") + gemma_tool_preamble(tools);
    // first_user_prefix: the first turn (which must be the user's) opens here.
    out.add(SpanType::system, "<start_of_turn>user\n" + content + "\n\n");
    first_user_open_ = true;
  }

  void add(const ChatMessage& m, ChatOutput& out) override {
    if (m.role == ChatRole::tool) {
      if (!in_tool_turn_) {
        expect_user_turn();
        out.add(SpanType::tool_result, open_user_turn());
        in_tool_turn_ = true;
      } else {
        out.add(SpanType::tool_result, "\n");
      }
      out.add(SpanType::tool_result, "```tool_output\n" + m.content + "\n```");
      return;
    }
    close(out);
    switch (m.role) {
      case ChatRole::user:
      case ChatRole::system: {
        // A later system message is a turn of role "system" to the template.
        if (m.role == ChatRole::system) {
          throw Error("gemma3: a system message is only allowed first");
        }
        expect_user_turn();
        out.add(SpanType::user, open_user_turn());
        out.add(SpanType::user, std::string(trim_whitespace(m.content)) + "<end_of_turn>\n");
        break;
      }
      case ChatRole::assistant: {
        expect_model_turn();
        std::string calls;
        for (const ToolCall& c : m.tool_calls) {
          if (!calls.empty()) calls += '\n';
          calls += gemma_tool_code(c);
        }
        const std::string whole = (m.content.empty() || calls.empty() ? m.content : m.content + "\n") + calls;
        const std::string_view trimmed = trim_whitespace(whole);
        const size_t text_len = calls.empty() ? trimmed.size() : trimmed.size() - calls.size();
        out.add(SpanType::response_sentence, "<start_of_turn>model\n");
        out.add(SpanType::response_sentence, trimmed.substr(0, text_len));
        out.add(SpanType::tool_call, trimmed.substr(text_len));
        out.add(calls.empty() ? SpanType::response_sentence : SpanType::tool_call,
                "<end_of_turn>\n");
        break;
      }
      case ChatRole::tool: break;
    }
  }

  void generation_prompt(ChatOutput& out) override {
    close(out);
    // Like the template, the prompt does not check alternation; the reply is a model turn.
    if (turns_ % 2 == 1) ++turns_;
    out.add(SpanType::response_sentence, "<start_of_turn>model\n");
  }

  std::string end_generated_reply() override { return "\n"; }

  std::string end_of_turn() const override { return "<end_of_turn>"; }
  std::string tool_call_opener(const std::string& name) const override {
    return "```tool_code\n" + name + (name.empty() ? "" : "(");
  }
  std::optional<std::string> tool_call_closer() const override { return std::nullopt; }
  void resume_after_reply() override {
    first_user_open_ = false;
    in_tool_turn_ = false;
    turns_ = 2;
  }

  void close(ChatOutput& out) override {
    if (!in_tool_turn_) return;
    out.add(SpanType::tool_result, "<end_of_turn>\n");
    in_tool_turn_ = false;
  }

 private:
  std::string open_user_turn() {
    if (first_user_open_) {
      first_user_open_ = false;
      return "";
    }
    return "<start_of_turn>user\n";
  }
  void expect_user_turn() {
    if (turns_ % 2 != 0) throw Error("gemma3: conversation roles must alternate user/assistant");
    ++turns_;
  }
  void expect_model_turn() {
    if (turns_ % 2 != 1) throw Error("gemma3: conversation roles must alternate user/assistant");
    ++turns_;
  }

  bool first_user_open_ = false;
  bool in_tool_turn_ = false;
  uint64_t turns_ = 0;
};

}  // namespace

std::unique_ptr<ChatFormatter> make_gemma3_formatter(const ChatTemplateSpec& spec) {
  return std::make_unique<Gemma3Formatter>(spec);
}

}  // namespace channel
