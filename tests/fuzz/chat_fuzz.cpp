// libFuzzer target for the chat layer's parsers: system prompt files with YAML front matter
// (tools, JSON schemas) and the per-family tool call parsers over arbitrary model output.
// Input: byte 0 picks the parser (0: system prompt, 1..4 and 6: tool calls of a family, 5: a Python
// call); the rest is the text. Bad input must end in channel::Error or plain text, never a
// crash; a parsed system prompt must render with every template.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "chat/chat_formatter.h"
#include "chat/reasoning_split.h"
#include "chat/system_prompt.h"
#include "chat/tool_call_parser.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace channel;
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const int which = data[0] % 7;
  try {
    if (which == 0) {
      const SystemPrompt sp = parse_system_prompt(text, "fuzz");
      for (const char* name : {"gemma3", "llama3.1", "qwen2.5", "channel", "mistral"}) {
        ChatOutput out;
        make_chat_formatter(chat_template_by_name(name, "<bos>"))->open(sp.text, sp.tools, out);
      }
    } else if (which == 5) {
      ToolCall call;
      parse_python_call(text, call);
    } else {
      const ChatFamily families[] = {ChatFamily::gemma3, ChatFamily::llama3, ChatFamily::chatml,
                                     ChatFamily::channel, ChatFamily::inst};
      const ParsedReply r = parse_tool_calls(families[which == 6 ? 4 : which - 1], text);
      if (r.content.size() > text.size()) __builtin_trap();  // calls only ever remove text
      // The reasoning split, whole and streamed in pieces of 1..8 bytes, agree.
      const SplitReply whole = split_reasoning(text);
      ReasoningStream stream;
      std::string reasoning, content;
      const auto take = [&](const std::vector<ReasoningStream::Piece>& ps) {
        for (const auto& p : ps) (p.reasoning ? reasoning : content) += p.text;
      };
      for (size_t i = 0, step = 1 + data[0] % 8; i < text.size(); i += step)
        take(stream.push(text.substr(i, step)));
      take(stream.finish());
      if (trim_whitespace(reasoning) != whole.reasoning) __builtin_trap();
      if (!whole.reasoning.empty() && content != whole.content) __builtin_trap();
    }
  } catch (const Error&) {
  }
  return 0;
}
