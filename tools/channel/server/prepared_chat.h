// A chat request made ready to reply: its conversation on a fresh ring (the system message
// and tools as anchors, the other messages fed turn by turn) and the reply's options, shared
// by /v1/chat/completions and /v1/responses. Also the checks every generating route makes.
#pragma once

#include <memory>

#include "chat/chat_session.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/server_context.h"

namespace channel::server {

// 404 for a model this server does not serve, 400 for a logit bias outside the vocabulary.
void check_model(const ServerContext& ctx, const GenerationParams& params);
// 400 context_length_exceeded beyond --max-prompt-tokens.
void check_prompt_length(const ServerContext& ctx, size_t n_tokens);

struct PreparedChat {
  std::unique_ptr<ChatSession> chat;
  ReplyOptions options;
  ResponseMeta meta;
  bool tools_offered = false;
};

// Counts the prompt's tokens in the server's metrics. `id_prefix` names the response
// ("chatcmpl", "resp").
std::unique_ptr<PreparedChat> prepare_chat(ServerContext& ctx, const ChatRequest& req,
                                           const char* id_prefix = "chatcmpl");

}  // namespace channel::server
