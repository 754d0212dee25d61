// The per-family formatter factories, one file each (gemma3_formatter.cpp, ...).
#pragma once

#include <memory>
#include <string>

#include "chat/chat_formatter.h"

namespace channel {

std::unique_ptr<ChatFormatter> make_gemma3_formatter(const ChatTemplateSpec& spec);
std::unique_ptr<ChatFormatter> make_llama3_formatter(const ChatTemplateSpec& spec);
std::unique_ptr<ChatFormatter> make_chatml_formatter(const ChatTemplateSpec& spec);
std::unique_ptr<ChatFormatter> make_channel_formatter(const ChatTemplateSpec& spec);
std::unique_ptr<ChatFormatter> make_inst_formatter(const ChatTemplateSpec& spec);

// A tool call id as Mistral's template requires it, 9 alphanumerics: `id` itself when it is
// one, else a fixed one derived from it.
std::string mistral_call_id(const std::string& id);

}  // namespace channel
