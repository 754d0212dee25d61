// What every route handler shares: the configuration, the model, metrics, live events,
// named sessions and the generation slots.
#pragma once

#include <httplib.h>

#include <nlohmann/json.hpp>

#include "server/event_bus.h"
#include "server/generation_slots.h"
#include "server/metrics.h"
#include "server/response_store.h"
#include "server/server_config.h"
#include "server/session_registry.h"

namespace channel::server {

struct ServerContext {
  explicit ServerContext(ServerConfig c)
      : config(std::move(c)),
        sessions(config, metrics, events),
        slots(config.max_concurrent, metrics),
        responses(config.max_stored_responses) {}
  ServerConfig config;
  Metrics metrics;
  EventBus events;
  SessionRegistry sessions;
  GenerationSlots slots;
  ResponseStore responses;  // /v1/responses kept for previous_response_id
};

// The request body as JSON: 400 for malformed JSON or one nested too deep (json_depth.h).
nlohmann::json parse_body(const httplib::Request& req);
void send_json(httplib::Response& res, const nlohmann::json& body, int status = 200);

void register_chat_routes(httplib::Server& http, ServerContext& ctx);
void register_embedding_routes(httplib::Server& http, ServerContext& ctx);
void register_responses_routes(httplib::Server& http, ServerContext& ctx);
void register_token_routes(httplib::Server& http, ServerContext& ctx);
void register_anthropic_routes(httplib::Server& http, ServerContext& ctx);
void register_session_routes(httplib::Server& http, ServerContext& ctx);
void register_web_routes(httplib::Server& http, ServerContext& ctx);

}  // namespace channel::server
