// Llama 3: the plain Llama 3 template (llama3) and the Llama 3.1 / 3.2 one (llama3.1) with
// its dated system header and JSON tool calls: tools go into the first user message
// (tools_in_user_message defaults to true), a call is {"name": ..., "parameters": {...}}, one
// per assistant turn, and results are turns of role ipython.
#include "chat/formatters.h"
#include "chat/python_json.h"
#include "util/error.h"

namespace channel {
namespace {

std::string header(std::string_view role) {
  return "<|start_header_id|>" + std::string(role) + "<|end_header_id|>\n\n";
}

class Llama3Formatter final : public ChatFormatter {
 public:
  explicit Llama3Formatter(ChatTemplateSpec spec) : ChatFormatter(std::move(spec)) {}

  void open(const std::optional<std::string>& system, std::span<const ToolSpec> tools,
            ChatOutput& out) override {
    if (!spec_.llama3_dated_system) {
      // The plain template puts BOS before the first message, whichever it is.
      if (!system && tools.empty()) return;
      std::string content(trim_whitespace(system.value_or("")));
      if (!tools.empty()) content += (content.empty() ? "" : "\n\n") + tool_instructions(tools);
      out.add(SpanType::system, spec_.bos_token + header("system") + content + "<|eot_id|>");
      bos_written_ = true;
      return;
    }
    std::string s = spec_.bos_token + header("system");
    if (!tools.empty()) s += "Environment: ipython\n";
    s += "Cutting Knowledge Date: December 2023\nToday Date: " + spec_.date_string + "\n\n";
    s += std::string(trim_whitespace(system.value_or(""))) + "<|eot_id|>";
    if (!tools.empty()) {
      // The first user message carries the tools; it opens here and its text follows.
      s += header("user") + "Given the following functions, please respond with a JSON for a "
           "function call with its proper arguments that best answers the given prompt.\n\n" +
           tool_instructions(tools);
      first_user_open_ = true;
    }
    out.add(SpanType::system, s);
    bos_written_ = true;
  }

  void add(const ChatMessage& m, ChatOutput& out) override {
    const std::string bos = bos_written_ ? "" : spec_.bos_token;
    bos_written_ = true;
    if (first_user_open_) {
      first_user_open_ = false;
      if (m.role != ChatRole::user) throw Error("llama3: with tools the first message must be the user's");
      out.add(SpanType::user, std::string(trim_whitespace(m.content)) + "<|eot_id|>");
      return;
    }
    switch (m.role) {
      case ChatRole::system:
      case ChatRole::user:
        out.add(SpanType::user, bos + header(chat_role_name(m.role)) +
                                    std::string(trim_whitespace(m.content)) + "<|eot_id|>");
        break;
      case ChatRole::assistant:
        if (m.tool_calls.empty()) {
          out.add(SpanType::response_sentence, bos + header("assistant"));
          out.add(SpanType::response_sentence,
                  std::string(trim_whitespace(m.content)) + "<|eot_id|>");
        } else {
          if (m.tool_calls.size() != 1)
            throw Error("llama3: this template supports one tool call per assistant turn");
          const ToolCall& c = m.tool_calls[0];
          out.add(SpanType::tool_call, bos + header("assistant") + "{\"name\": \"" + c.name +
                                           "\", \"parameters\": " +
                                           python_json_dumps(c.arguments) + "}<|eot_id|>");
        }
        break;
      case ChatRole::tool:
        // Jinja tests a string as iterable, so the template writes the result as a JSON string.
        out.add(SpanType::tool_result, bos + header("ipython") +
                                           python_json_dumps(OrderedJson(m.content)) +
                                           "<|eot_id|>");
        break;
    }
  }

  void generation_prompt(ChatOutput& out) override {
    if (first_user_open_) throw Error("llama3: with tools the conversation needs a user message");
    out.add(SpanType::response_sentence, header("assistant"));
  }

  std::string end_generated_reply() override { return ""; }

  std::string end_of_turn() const override { return "<|eot_id|>"; }
  std::string tool_call_opener(const std::string& name) const override {
    return "{\"name\": \"" + (name.empty() ? std::string() : name + "\", \"parameters\": ");
  }
  std::optional<std::string> tool_call_closer() const override { return "}"; }
  void resume_after_reply() override {
    first_user_open_ = false;
    bos_written_ = true;
  }

 private:
  static std::string tool_instructions(std::span<const ToolSpec> tools) {
    std::string s =
        "Respond in the format {\"name\": function name, \"parameters\": dictionary of argument "
        "name and its value}.Do not use variables.\n\n";
    for (const ToolSpec& t : tools) s += python_json_dumps(t.to_openai_json(), 4) + "\n\n";
    return s;
  }

  bool first_user_open_ = false;
  bool bos_written_ = false;
};

}  // namespace

std::unique_ptr<ChatFormatter> make_llama3_formatter(const ChatTemplateSpec& spec) {
  return std::make_unique<Llama3Formatter>(spec);
}

}  // namespace channel
