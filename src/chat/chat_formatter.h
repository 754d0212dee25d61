// Chat templates as per-family formatters. No Jinja engine is packaged for C++ in Debian, so
// each family's template is written out by hand and proven byte-identical to Jinja2 rendering
// the real template text (tests/unit/chat_template_test.cpp). A formatter renders a
// conversation incrementally, turn by turn, into segments that carry the SpanType the ring
// stores them under: the anchors (system prompt, tools) first, then one turn at a time, so a
// never-ending chat can append a turn without re-rendering what came before.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_message.h"
#include "kv/span.h"

namespace channel {

struct ChatSegment {
  SpanType type = SpanType::system;
  std::string text;
  bool operator==(const ChatSegment&) const = default;
};

// Rendered text cut into typed segments; adjacent text of one type is merged.
class ChatOutput {
 public:
  void add(SpanType type, std::string_view text);
  const std::vector<ChatSegment>& segments() const { return segments_; }
  std::string text() const;
  bool empty() const { return segments_.empty(); }
  void clear() { segments_.clear(); }

 private:
  std::vector<ChatSegment> segments_;
};

enum class ChatFamily : uint8_t {
  gemma3,   // <start_of_turn>user ... <end_of_turn>; tools through ```tool_code``` blocks
  llama3,   // <|start_header_id|>role<|end_header_id|> ... <|eot_id|>; JSON tool calls
  chatml,   // <|im_start|>role ... <|im_end|> (Qwen and others); Hermes <tool_call> tags
  channel,  // Channel's own plain-text models: "Question: ... / Answer: ..." lines
  inst,     // [INST] ... [/INST]: Llama 2 (<<SYS>>) and Mistral ([TOOL_CALLS] JSON calls)
};

const char* chat_family_name(ChatFamily family);

// Which template, with the few facts that differ between members of a family.
struct ChatTemplateSpec {
  ChatFamily family = ChatFamily::channel;
  std::string name;       // as --chat-template names it: gemma3, llama3, llama3.1, ...
  std::string bos_token;  // the text of the vocabulary's BOS token ("" when none)
  // llama3: the Llama 3.1+ system header (Environment / Cutting Knowledge Date / Today Date)
  // and its tool preamble; false for the plain Llama 3 template.
  bool llama3_dated_system = true;
  std::string date_string = "26 Jul 2024";  // the Llama 3.1 template's default
  // chatml: the system prompt the template adds when the conversation has none (Qwen2.5).
  std::string chatml_default_system;
};

// The names --chat-template accepts, for help and errors.
std::string chat_template_names();
// Throws channel::Error naming the accepted names for an unknown one.
ChatTemplateSpec chat_template_by_name(std::string_view name, std::string bos_token);
// Recognises the family from a GGUF's tokenizer.chat_template text; an empty or unknown text
// gives the `channel` template (Channel's models are trained on plain text).
ChatTemplateSpec detect_chat_template(std::string_view template_text, std::string bos_token);

class ChatFormatter {
 public:
  virtual ~ChatFormatter() = default;
  const ChatTemplateSpec& spec() const { return spec_; }

  // Opens the conversation: BOS, the system prompt (nullopt: the conversation has none) and
  // the tools. Everything written here is an anchor. Called once, first.
  virtual void open(const std::optional<std::string>& system, std::span<const ToolSpec> tools,
                    ChatOutput& out) = 0;
  // Appends one turn. Throws channel::Error where the template would raise (roles out of
  // order, more tool calls than the template supports).
  virtual void add(const ChatMessage& message, ChatOutput& out) = 0;
  // The assistant header the model's reply follows.
  virtual void generation_prompt(ChatOutput& out) = 0;
  // Records that a reply generated after generation_prompt() ended, so later turns render
  // as after an assistant message. Returns the text the template puts after the reply's
  // end-of-generation token (e.g. "\n" after <end_of_turn>), to be fed as well.
  virtual std::string end_generated_reply() = 0;
  // Closes whatever a template leaves open at the end of the messages (ChatML's group of
  // tool responses). render_conversation calls it when there is no generation prompt.
  virtual void close(ChatOutput& out) { (void)out; }
  // Text that ends a reply besides an end-of-generation token (Channel's one-line answers).
  virtual std::vector<std::string> stop_strings() const { return {}; }
  // The text of the token (or line end) that closes an assistant turn: fed after a reply
  // that ended without it (a token limit, an interrupt), before end_generated_reply().
  virtual std::string end_of_turn() const = 0;
  // The start of a reply that calls `name` (any tool when empty), to force a tool call
  // (OpenAI tool_choice "required" or a named function): the model writes the rest.
  virtual std::string tool_call_opener(const std::string& name) const = 0;
  // What closes a call after its arguments object, when the family writes the arguments as
  // a JSON object after tool_call_opener(name) (then they can be generated under the JSON
  // constraint); nullopt when it does not (Gemma's Python calls).
  virtual std::optional<std::string> tool_call_closer() const = 0;
  // Puts a fresh formatter in the state it has after open() and a complete reply (a
  // conversation resumed from a session file, which is saved between turns).
  virtual void resume_after_reply() = 0;

 protected:
  explicit ChatFormatter(ChatTemplateSpec spec) : spec_(std::move(spec)) {}
  ChatTemplateSpec spec_;
};

std::unique_ptr<ChatFormatter> make_chat_formatter(const ChatTemplateSpec& spec);

// A whole conversation: messages[0] is the system prompt when its role is system.
ChatOutput render_conversation(const ChatTemplateSpec& spec, std::span<const ChatMessage> messages,
                               std::span<const ToolSpec> tools, bool add_generation_prompt);

// Python's str.strip() for the ASCII whitespace Jinja's `trim` removes.
std::string_view trim_whitespace(std::string_view s);

}  // namespace channel
