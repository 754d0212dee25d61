// The per-family formatter factories, one file each (gemma3_formatter.cpp, ...).
#pragma once

#include <memory>

#include "chat/chat_formatter.h"

namespace channel {

std::unique_ptr<ChatFormatter> make_gemma3_formatter(const ChatTemplateSpec& spec);
std::unique_ptr<ChatFormatter> make_llama3_formatter(const ChatTemplateSpec& spec);
std::unique_ptr<ChatFormatter> make_chatml_formatter(const ChatTemplateSpec& spec);
std::unique_ptr<ChatFormatter> make_channel_formatter(const ChatTemplateSpec& spec);

}  // namespace channel
