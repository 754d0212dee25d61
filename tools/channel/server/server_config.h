// What `channel serve` is configured with (cmd_serve.cpp fills it from flags).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "chat/chat_session.h"

namespace channel {
class Model;
class SessionBase;
}

namespace channel::server {

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;              // "" = no key needed
  size_t max_body_bytes = 1 << 20;  // 413 beyond
  int max_prompt_tokens = 16384;    // 400 context_length_exceeded beyond
  int max_concurrent = 8;           // generations at once; 503 beyond
  int max_sessions = 16;            // named sessions; 429 beyond
  size_t max_stored_responses = 256;  // /v1/responses kept (the newest) for previous_response_id
  int http_threads = 16;            // connections served at once
  int default_max_tokens = 256;
  std::string model_id = "channel";  // what /v1/models lists and requests name
  std::string data_dir;              // named sessions' saves and memories ("" = none)
  ChatConfig chat;                   // ring, template, sampling defaults, threads
  std::shared_ptr<const Model> model;
  // With --device cuda: a contiguous context of n_ctx tokens on that device, over the weights
  // the ring's sessions share, for the work outside the ring (prompt scoring, embeddings).
  // Empty: those run on the CPU.
  std::function<std::unique_ptr<SessionBase>(int n_ctx)> device_context;
};

}  // namespace channel::server
