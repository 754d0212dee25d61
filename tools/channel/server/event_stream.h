// A streamed response (server-sent events) and the protocol every streaming route follows
// around its generation: the stream counted in the metrics; an error thrown while generating
// sent as the route's error event, never let out of the content provider (cpp-httplib calls
// it outside its handler's try, so it would end the process); the tokens counted and the
// generation slot freed before the last events (a client that reads the end and asks again at
// once must find the slot free); a client that went away counted as a disconnect.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <string>

#include "server/server_context.h"

namespace channel::server {

// The client's end of one stream.
class EventSink {
 public:
  explicit EventSink(httplib::DataSink& sink) : sink_(sink) {}
  // Writes s while the client listens; false once it has gone (nothing more is written).
  bool send(const std::string& s) { return alive_ = alive_ && sink_.write(s.data(), s.size()); }
  bool alive() const { return alive_; }

 private:
  httplib::DataSink& sink_;
  bool alive_ = true;
};

// Makes res an event stream whose events `write` sends, then ends it (an exception out of
// `write` ends it at once, the connection closed).
void start_event_stream(ServerContext& ctx, httplib::Response& res,
                        std::function<void(EventSink&)> write);

// Runs generate() (a result with n_tokens: ChatReply, GenerationResult), counts its tokens and
// frees the lease. When it throws: frees the lease, sends error_event(what) and returns nullopt
// (the caller sends nothing more).
template <typename Generate, typename ErrorEvent>
auto generate_streamed(ServerContext& ctx, GenerationSlots::Lease& lease, EventSink& out,
                       Generate&& generate, ErrorEvent&& error_event)
    -> std::optional<decltype(generate())> {
  try {
    auto result = generate();
    ctx.metrics.completion_tokens += static_cast<uint64_t>(result.n_tokens);
    lease.release();
    return result;
  } catch (const std::exception& e) {
    lease.release();
    out.send(error_event(std::string(e.what())));
    return std::nullopt;
  }
}

}  // namespace channel::server
