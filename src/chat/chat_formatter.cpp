// Formatter selection, shared helpers and whole-conversation rendering (chat_formatter.h).
#include "chat/chat_formatter.h"

#include "chat/formatters.h"
#include "util/error.h"

namespace channel {

void ChatOutput::add(SpanType type, std::string_view text) {
  if (text.empty()) return;
  if (!segments_.empty() && segments_.back().type == type) {
    segments_.back().text += text;
  } else {
    segments_.push_back({type, std::string(text)});
  }
}

std::string ChatOutput::text() const {
  std::string s;
  for (const ChatSegment& seg : segments_) s += seg.text;
  return s;
}

const char* chat_role_name(ChatRole role) {
  switch (role) {
    case ChatRole::system: return "system";
    case ChatRole::user: return "user";
    case ChatRole::assistant: return "assistant";
    case ChatRole::tool: return "tool";
  }
  return "?";
}

OrderedJson ToolSpec::to_openai_json() const {
  OrderedJson fn = OrderedJson::object();
  fn["name"] = name;
  fn["description"] = description;
  fn["parameters"] = parameters;
  OrderedJson t = OrderedJson::object();
  t["type"] = "function";
  t["function"] = std::move(fn);
  return t;
}

const char* chat_family_name(ChatFamily family) {
  switch (family) {
    case ChatFamily::gemma3: return "gemma3";
    case ChatFamily::llama3: return "llama3";
    case ChatFamily::chatml: return "chatml";
    case ChatFamily::channel: return "channel";
    case ChatFamily::inst:
      return "inst";
  }
  return "?";
}

namespace {
constexpr const char* kQwenDefaultSystem =
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
}

std::string chat_template_names() {
  return "channel, gemma3, llama3, llama3.1, chatml, qwen2.5, llama2, mistral";
}

ChatTemplateSpec chat_template_by_name(std::string_view name, std::string bos_token) {
  ChatTemplateSpec s;
  s.name = std::string(name);
  s.bos_token = std::move(bos_token);
  if (name == "channel") {
    s.family = ChatFamily::channel;
  } else if (name == "gemma3") {
    s.family = ChatFamily::gemma3;
  } else if (name == "llama3") {
    s.family = ChatFamily::llama3;
    s.llama3_dated_system = false;
  } else if (name == "llama3.1") {
    s.family = ChatFamily::llama3;
  } else if (name == "chatml") {
    s.family = ChatFamily::chatml;
  } else if (name == "qwen2.5") {
    s.family = ChatFamily::chatml;
    s.chatml_default_system = kQwenDefaultSystem;
  } else if (name == "llama2" || name == "mistral") {
    s.family = ChatFamily::inst;
  } else {
    throw_error("unknown chat template '{}' (one of: {})", name, chat_template_names());
  }
  return s;
}

ChatTemplateSpec detect_chat_template(std::string_view text, std::string bos_token) {
  const auto has = [&](std::string_view needle) { return text.find(needle) != text.npos; };
  std::string name = "channel";
  if (has("<start_of_turn>")) {
    name = "gemma3";
  } else if (has("<|start_header_id|>")) {
    name = has("Cutting Knowledge Date") ? "llama3.1" : "llama3";
  } else if (has("<|im_start|>")) {
    name = has("You are Qwen, created by Alibaba Cloud") ? "qwen2.5" : "chatml";
  } else if (has("[INST]")) {
    name = has("<<SYS>>") ? "llama2" : "mistral";
  }
  return chat_template_by_name(name, std::move(bos_token));
}

std::unique_ptr<ChatFormatter> make_chat_formatter(const ChatTemplateSpec& spec) {
  switch (spec.family) {
    case ChatFamily::gemma3: return make_gemma3_formatter(spec);
    case ChatFamily::llama3: return make_llama3_formatter(spec);
    case ChatFamily::chatml: return make_chatml_formatter(spec);
    case ChatFamily::channel: return make_channel_formatter(spec);
    case ChatFamily::inst:
      return make_inst_formatter(spec);
  }
  throw Error("chat template: unknown family");
}

ChatOutput render_conversation(const ChatTemplateSpec& spec, std::span<const ChatMessage> messages,
                               std::span<const ToolSpec> tools, bool add_generation_prompt) {
  std::unique_ptr<ChatFormatter> f = make_chat_formatter(spec);
  ChatOutput out;
  std::optional<std::string> system;
  size_t first = 0;
  if (!messages.empty() && messages[0].role == ChatRole::system) {
    system = messages[0].content;
    first = 1;
  }
  f->open(system, tools, out);
  for (size_t i = first; i < messages.size(); ++i) f->add(messages[i], out);
  if (add_generation_prompt) {
    f->generation_prompt(out);
  } else {
    f->close(out);
  }
  return out;
}

std::string_view trim_whitespace(std::string_view s) {
  constexpr std::string_view ws = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(ws);
  if (b == s.npos) return {};
  const size_t e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

}  // namespace channel
