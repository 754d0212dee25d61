// The flags `chat` and `serve` share: the model, the system prompt file (YAML front matter
// with tools), the chat template (from the GGUF, or --chat-template), the ring geometry,
// memory and sampling; and the ChatConfig they make.
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "chat/chat_session.h"
#include "recall_flags.h"
#include "sampling_flags.h"

namespace channel {
class Model;
}

namespace channel::cli {

struct ChatFlags {
  std::string model;
  std::string system_file;    // --system FILE
  std::string chat_template;  // --chat-template NAME ("" = from the GGUF)
  int threads = 1;
  std::string device = "cpu";  // --device cpu|cuda[:N]: where the ring's forward runs
  int64_t slots = 4096;
  int64_t recall = 128;
  std::string memory;  // --memory FILE
  int64_t memory_capacity = 4096;
  RecallFlags recall_flags;
  int max_tokens = 512;  // per reply
  SamplingFlags sampling;
};

void add_chat_options(CLI::App& sub, ChatFlags& flags);
// Checks what can be checked before the model loads (the system prompt file, the template
// name, sampling), so bad input costs no load.
void validate_chat_flags(const ChatFlags& flags);
// The template: --chat-template, else recognised from the GGUF's tokenizer.chat_template.
ChatTemplateSpec chat_template_for(const ChatFlags& flags, const Model& model);
ChatConfig make_chat_config(const ChatFlags& flags, const Model& model);

}  // namespace channel::cli
