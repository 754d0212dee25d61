// The web view: GET / serves the page (web_page.cpp); GET /v1/events is the live event
// stream it draws from (SSE): a state snapshot of every session on connect, then tokens,
// turns and ring states as they happen, with a comment line every 10 s to find closed
// connections.
#include <chrono>

#include "server/server_context.h"
#include "server/web_page.h"

namespace channel::server {

void register_web_routes(httplib::Server& http, ServerContext& ctx) {
  http.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(web_page_html(), "text/html; charset=utf-8");
  });
  http.Get("/v1/events", [&ctx](const httplib::Request&, httplib::Response& res) {
    auto sub = ctx.events.subscribe();
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [&ctx, sub](size_t, httplib::DataSink& sink) {
          std::string hello = "event: hello\ndata: {\"model\": \"" + ctx.config.model_id + "\"}\n\n";
          if (!sink.write(hello.data(), hello.size())) return false;
          for (const std::string& n : ctx.sessions.names()) {
            try {
              std::shared_ptr<NamedSession> s = ctx.sessions.get(n);
              std::unique_lock<std::mutex> lock(s->mu, std::try_to_lock);
              if (!lock.owns_lock()) continue;
              nlohmann::json st = s->state();
              st["transcript"] = s->transcript;
              const std::string e = "event: state\ndata: " + st.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n";
              if (!sink.write(e.data(), e.size())) return false;
            } catch (const std::exception&) {
            }
          }
          for (;;) {
            std::deque<std::string> batch;
            {
              std::unique_lock<std::mutex> lock(sub->mu);
              sub->cv.wait_for(lock, std::chrono::seconds(10), [&] { return sub->closed || !sub->queue.empty(); });
              if (sub->closed) break;
              batch.swap(sub->queue);
            }
            if (batch.empty()) batch.push_back(": ping\n\n");
            for (const std::string& e : batch) {
              if (!sink.write(e.data(), e.size())) return false;
            }
          }
          sink.done();
          return true;
        },
        [&ctx, sub](bool) { ctx.events.unsubscribe(sub); });
  });
}

}  // namespace channel::server
