// The HTTP server's setup: routes, limits, authentication, errors (http_server.h).
#include "server/http_server.h"

#include <csignal>
#include <cstdio>
#include <set>
#include <thread>

#include "model/model.h"
#include "server/api_error.h"
#include "server/json_depth.h"
#include "server/server_context.h"
#include "util/error.h"

namespace channel::server {

using nlohmann::json;

json parse_body(const httplib::Request& req) {
  json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) bad_request("the body is not valid JSON");
  check_json_depth(body, "the body");
  return body;
}

void send_json(httplib::Response& res, const json& body, int status) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

namespace {

httplib::Server* g_server = nullptr;

void on_signal(int) {
  if (g_server) g_server->stop();
}

// The route a request matched, for metrics (no ids in labels).
// The metrics label of a request: its route, with names and ids as placeholders, and every
// path no route serves as one label, so that a client probing paths or names cannot grow the
// counters without bound.
std::string route_label(const httplib::Request& req) {
  static const std::set<std::string> kRoutes = {"/",
                                                "/health",
                                                "/metrics",
                                                "/v1/models",
                                                "/v1/chat/completions",
                                                "/v1/completions",
                                                "/v1/embeddings",
                                                "/v1/responses",
                                                "/tokenize",
                                                "/v1/messages",
                                                "/v1/messages/count_tokens",
                                                "/detokenize",
                                                "/v1/sessions",
                                                "/v1/events"};
  static const std::set<std::string> kSessionRoutes = {"",         "/messages", "/save",
                                                       "/restore", "/memory",   "/probe"};
  const std::string& p = req.path;
  if (kRoutes.count(p)) return p;
  if (p.rfind("/v1/models/", 0) == 0 && p.find('/', 11) == std::string::npos)
    return "/v1/models/{id}";
  if (p.rfind("/v1/responses/", 0) == 0 && p.find('/', 14) == std::string::npos)
    return "/v1/responses/{id}";
  if (p.rfind("/v1/sessions/", 0) == 0) {
    const size_t slash = p.find('/', 13);
    const std::string rest = slash == std::string::npos ? std::string() : p.substr(slash);
    if (kSessionRoutes.count(rest)) return "/v1/sessions/{name}" + rest;
  }
  return "(no route)";
}

// An error in the shape the request's API uses: Anthropic's on /v1/messages, else OpenAI's.
void send_error(const httplib::Request& req, httplib::Response& res, const ApiError& e) {
  const bool anthropic = req.path.rfind("/v1/messages", 0) == 0;
  send_json(res, anthropic ? e.to_anthropic_json() : e.to_json(), e.status);
}

}  // namespace

int run_server(ServerConfig config) {
  ServerContext ctx(std::move(config));
  httplib::Server http;
  const int threads = ctx.config.http_threads;
  http.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  http.set_payload_max_length(ctx.config.max_body_bytes);
  http.set_read_timeout(30, 0);
  http.set_write_timeout(30, 0);
  http.set_keep_alive_max_count(1000);

  http.set_pre_routing_handler([&ctx](const httplib::Request& req, httplib::Response& res) {
    if (req.method == "OPTIONS") return httplib::Server::HandlerResponse::Unhandled;
    // The page and /health are open; the API needs the key when one is set.
    const bool open = req.path == "/" || req.path == "/health";
    if (!ctx.config.api_key.empty() && !open) {
      const std::string want = "Bearer " + ctx.config.api_key;
      // Authorization: Bearer KEY (OpenAI's clients), x-api-key: KEY (Anthropic's), ?key=.
      if (req.get_header_value("Authorization") != want &&
          req.get_header_value("x-api-key") != ctx.config.api_key &&
          req.get_param_value("key") != ctx.config.api_key) {
        send_error(req, res,
                   ApiError(401, "missing or wrong API key (Authorization: Bearer KEY)", "",
                            "invalid_api_key"));
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  http.set_exception_handler(
      [](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
        try {
          std::rethrow_exception(ep);
        } catch (const ApiError& e) {
          send_error(req, res, e);
        } catch (const Error& e) {
          send_error(req, res, ApiError(400, e.what()));
        } catch (const std::bad_alloc&) {
          send_error(req, res, ApiError(503, "out of memory"));
        } catch (const std::exception& e) {
          send_error(req, res, ApiError(500, e.what()));
        }
      });
  http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;  // a handler already wrote its error
    if (res.status == 413) {
      // cpp-httplib caps form-encoded bodies (curl -d's default type) at 8 KiB, far below ours.
      const bool form =
          req.get_header_value("Content-Type").rfind("application/x-www-form-urlencoded", 0) == 0;
      send_error(req, res,
                 ApiError(413, form ? "a form-encoded body over 8 KiB is refused: send it as "
                                      "Content-Type: application/json"
                                    : "the request body is larger than the server's limit"));
    } else if (res.status == 404) {
      send_error(req, res, ApiError(404, "no route " + req.method + " " + req.path));
    } else if (res.status >= 400) {
      send_error(
          req, res,
          ApiError(res.status,
                   "the request could not be read (a POST needs a body or Content-Length: 0)"));
    }
  });
  http.set_logger([&ctx](const httplib::Request& req, const httplib::Response& res) {
    ctx.metrics.request(route_label(req), res.status);
  });

  http.Get("/health", [&ctx](const httplib::Request&, httplib::Response& res) {
    send_json(res, {{"status", "ok"}, {"model", ctx.config.model_id}, {"sessions", ctx.sessions.names().size()}});
  });
  http.Get("/metrics", [&ctx](const httplib::Request&, httplib::Response& res) {
    res.set_content(ctx.metrics.render(), "text/plain; version=0.0.4");
  });
  // A model in OpenAI's shape and Anthropic's at once (each client reads its own fields).
  const auto model_json = [](const std::string& id) {
    return json{{"id", id},
                {"object", "model"},
                {"created", 0},
                {"owned_by", "channel"},
                {"type", "model"},
                {"display_name", id},
                {"created_at", "1970-01-01T00:00:00Z"}};
  };
  const auto models = [&ctx, model_json](const httplib::Request&, httplib::Response& res) {
    const std::string& id = ctx.config.model_id;
    send_json(res, {{"object", "list"},
                    {"data", json::array({model_json(id)})},
                    {"has_more", false},
                    {"first_id", id},
                    {"last_id", id}});
  };
  http.Get("/v1/models", models);
  http.Get(R"(/v1/models/([^/]+))", [&ctx, model_json](const httplib::Request& req,
                                                       httplib::Response& res) {
    const std::string id = req.matches[1];
    if (id != ctx.config.model_id)
      throw ApiError(404, "the model '" + id + "' does not exist", "model", "model_not_found");
    send_json(res, model_json(id));
  });
  register_chat_routes(http, ctx);
  register_embedding_routes(http, ctx);
  register_responses_routes(http, ctx);
  register_token_routes(http, ctx);
  register_anthropic_routes(http, ctx);
  register_session_routes(http, ctx);
  register_web_routes(http, ctx);

  if (ctx.config.port == 0) {
    ctx.config.port = http.bind_to_any_port(ctx.config.host);  // --port 0: any free port
    if (ctx.config.port <= 0) throw_error("cannot listen on {}", ctx.config.host);
  } else if (!http.bind_to_port(ctx.config.host, ctx.config.port)) {
    throw_error("cannot listen on {}:{} (in use, or not an address of this machine)", ctx.config.host,
                ctx.config.port);
  }
  g_server = &http;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::signal(SIGPIPE, SIG_IGN);
  std::fprintf(stderr, "channel: serving %s on http://%s:%d (%s)\n", ctx.config.model_id.c_str(),
               ctx.config.host.c_str(), ctx.config.port,
               ctx.config.api_key.empty() ? "no API key" : "API key required");
  std::fflush(stderr);
  http.listen_after_bind();
  ctx.events.close_all();
  g_server = nullptr;
  std::fprintf(stderr, "channel: server stopped\n");
  return 0;
}

}  // namespace channel::server
