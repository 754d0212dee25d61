// The [INST] ... [/INST] templates of Llama 2 and Mistral.
//
// llama2: <s>[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{first user} [/INST] {reply} </s><s>[INST]
// {user} [/INST] ...; no tools (the template has none, so tools are refused).
//
// mistral (Mistral-7B-Instruct-v0.3's template, which v0.1/v0.2 extend): <s>[INST] {user}
// [/INST] {reply}</s>, calls as [TOOL_CALLS] [{"name", "arguments", "id"}]</s> and results as
// [TOOL_RESULTS] {"content": ..., "call_id": ...}[/TOOL_RESULTS]. The template puts the system
// prompt and the [AVAILABLE_TOOLS] list before the *last* user message, which a conversation
// that runs for weeks on a ring cannot re-render at every turn; here both lead the first
// [INST] and are anchors. The text equals the template's for a conversation of one user
// message; later turns lack the repeated system prompt. Call ids are 9 alphanumerics, as
// the template requires: other ids are mapped to such ones (the same id, the same mapping).
#include <cctype>

#include "chat/formatters.h"
#include "chat/python_json.h"
#include "util/error.h"

namespace channel {
namespace {

// Both families' vocabularies (SentencePiece, Llama's) end a turn with this token.
constexpr const char* kEos = "</s>";

std::string rstrip(std::string_view s) {
  const size_t e = s.find_last_not_of(" \t\n\r\f\v");
  return e == s.npos ? std::string() : std::string(s.substr(0, e + 1));
}

}  // namespace

std::string mistral_call_id(const std::string& id) {
  bool alnum = id.size() == 9;
  for (const char c : id) alnum = alnum && std::isalnum(static_cast<unsigned char>(c));
  if (alnum) return id;
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (const char c : id) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  static constexpr char kDigits[] =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string out(9, 'a');
  for (char& c : out) {
    c = kDigits[h % 62];
    h /= 62;
  }
  return out;
}

namespace {

class InstFormatter final : public ChatFormatter {
 public:
  explicit InstFormatter(ChatTemplateSpec spec)
      : ChatFormatter(std::move(spec)), llama2_(spec_.name == "llama2") {}

  void open(const std::optional<std::string>& system, std::span<const ToolSpec> tools,
            ChatOutput& out) override {
    if (llama2_) {
      if (!tools.empty()) throw Error("chat template llama2: the template has no tools");
      if (system) {
        out.add(SpanType::system,
                spec_.bos_token + "[INST] <<SYS>>\n" + *system + "\n<</SYS>>\n\n");
        system_open_ = true;
      }
      return;
    }
    std::string s = spec_.bos_token;
    if (!tools.empty()) {
      s += "[AVAILABLE_TOOLS] [";
      for (size_t i = 0; i < tools.size(); ++i) {
        // The template writes each function's string fields unescaped, the others as JSON.
        const OrderedJson fn = tools[i].to_openai_json()["function"];
        s += "{\"type\": \"function\", \"function\": {";
        bool first = true;
        for (const auto& [key, val] : fn.items()) {
          if (key == "return") continue;
          s += first ? "" : ", ";
          first = false;
          s += '"';
          s += key;
          s += "\": ";
          if (val.is_string()) {
            s += '"';
            s += val.get<std::string>();
            s += '"';
          } else {
            s += python_json_dumps(val);
          }
        }
        s += i + 1 < tools.size() ? "}}, " : "}}]";
      }
      s += "[/AVAILABLE_TOOLS]";
    }
    if (system) {
      s += "[INST] " + *system + "\n\n";
      system_open_ = true;
    }
    out.add(SpanType::system, s);
  }

  void add(const ChatMessage& m, ChatOutput& out) override {
    const bool call = m.role == ChatRole::assistant && !m.tool_calls.empty();
    if (m.role == ChatRole::tool || call) {
      if (llama2_) throw Error("chat template llama2: the template has no tools");
    } else if ((m.role == ChatRole::user) != expect_user_ || m.role == ChatRole::system) {
      throw Error("chat template " + spec_.name +
                  ": after the system prompt, roles must alternate user/assistant/user/...");
    } else {
      expect_user_ = !expect_user_;
    }
    switch (m.role) {
      case ChatRole::user:
        if (llama2_) {
          out.add(SpanType::user, system_open_
                                      ? rstrip(m.content) + " [/INST]"
                                      : spec_.bos_token + "[INST] " +
                                            std::string(trim_whitespace(m.content)) + " [/INST]");
        } else {
          out.add(SpanType::user, (system_open_ ? "" : "[INST] ") + m.content + "[/INST]");
        }
        system_open_ = false;
        return;
      case ChatRole::assistant:
        if (call) {
          std::string s = "[TOOL_CALLS] [";
          for (size_t i = 0; i < m.tool_calls.size(); ++i) {
            const ToolCall& c = m.tool_calls[i];
            OrderedJson fn = OrderedJson::object();
            fn["name"] = c.name;
            fn["arguments"] = c.arguments;
            std::string j = python_json_dumps(fn);
            j.pop_back();  // the template's out[:-1]
            s += j;
            s += ", \"id\": \"";
            s += mistral_call_id(c.id);
            s += i + 1 < m.tool_calls.size() ? "\"}, " : "\"}]";
          }
          out.add(SpanType::tool_call, s + kEos);
          return;
        }
        {
          std::string reply = " ";
          reply += trim_whitespace(m.content);
          reply += llama2_ ? " " : "";
          reply += kEos;
          out.add(SpanType::response_sentence, reply);
        }
        return;
      case ChatRole::tool:
        out.add(SpanType::tool_result, "[TOOL_RESULTS] {\"content\": " + m.content +
                                           ", \"call_id\": \"" + mistral_call_id(m.tool_call_id) +
                                           "\"}[/TOOL_RESULTS]");
        return;
      case ChatRole::system:
        return;
    }
  }

  // The reply follows [/INST] (or a result) directly: these templates have no header.
  void generation_prompt(ChatOutput& out) override { (void)out; }
  std::string end_generated_reply() override {
    expect_user_ = true;
    return "";
  }
  std::string end_of_turn() const override { return kEos; }
  std::string tool_call_opener(const std::string& name) const override {
    if (llama2_) return "";
    return "[TOOL_CALLS] [{\"name\": \"" +
           (name.empty() ? std::string() : name + "\", \"arguments\": ");
  }
  std::optional<std::string> tool_call_closer() const override {
    if (llama2_) return std::nullopt;
    return "}]";
  }
  void resume_after_reply() override {
    expect_user_ = true;
    system_open_ = false;
  }

 private:
  bool llama2_;
  bool system_open_ = false;  // the first user message completes the system prompt's [INST]
  bool expect_user_ = true;   // the template's alternation check (calls and results aside)
};

}  // namespace

std::unique_ptr<ChatFormatter> make_inst_formatter(const ChatTemplateSpec& spec) {
  return std::make_unique<InstFormatter>(spec);
}

}  // namespace channel
