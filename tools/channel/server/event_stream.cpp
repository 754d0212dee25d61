// Streamed responses (event_stream.h).
#include "server/event_stream.h"

#include <exception>
#include <utility>

namespace channel::server {

void start_event_stream(ServerContext& ctx, httplib::Response& res,
                        std::function<void(EventSink&)> write) {
  ++ctx.metrics.streams;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream", [&ctx, write = std::move(write)](size_t, httplib::DataSink& sink) {
        EventSink out(sink);
        try {
          write(out);
        } catch (const std::exception&) {  // after the first byte no status can tell of it
          sink.done();
          return false;
        }
        if (!out.alive()) ++ctx.metrics.disconnects;
        sink.done();
        return out.alive();
      });
}

}  // namespace channel::server
