// The streaming routes' protocol (server/event_stream.h) on a real cpp-httplib server: a
// generation that throws sends the route's error event and ends that stream while the server
// goes on serving; the tokens are counted and the generation slot is free before the last
// events; an exception out of the events ends the stream, not the process; a client that
// hangs up is counted as a disconnect.
#include "server/event_stream.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "util/error.h"

namespace channel::server {
namespace {

struct Generated {
  int n_tokens = 0;
};

std::string error_event(const std::string& message) {
  return "data: error " + message + "\n\n";
}

class EventStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    http_.Get("/throws", [this](const httplib::Request&, httplib::Response& res) {
      auto lease = std::make_shared<GenerationSlots::Lease>(ctx_.slots);
      start_event_stream(ctx_, res, [this, lease](EventSink& out) {
        out.send("data: first\n\n");
        const auto g = generate_streamed(
            ctx_, *lease, out, []() -> Generated { throw Error("the model broke"); }, error_event);
        if (!g) return;
        out.send("data: never\n\n");
      });
    });
    http_.Get("/ok", [this](const httplib::Request&, httplib::Response& res) {
      auto lease = std::make_shared<GenerationSlots::Lease>(ctx_.slots);
      start_event_stream(ctx_, res, [this, lease](EventSink& out) {
        const auto g = generate_streamed(
            ctx_, *lease, out, [] { return Generated{5}; }, error_event);
        if (!g) return;
        // The one slot is free again before the last event goes out.
        bool free = true;
        try {
          GenerationSlots::Lease again(ctx_.slots);
        } catch (const ApiError&) {
          free = false;
        }
        out.send(std::string("data: slot ") + (free ? "free" : "taken") + "\n\n");
      });
    });
    http_.Get("/breaks", [this](const httplib::Request&, httplib::Response& res) {
      start_event_stream(ctx_, res, [](EventSink& out) {
        out.send("data: first\n\n");
        throw std::runtime_error("a bug after the first event");
      });
    });
    http_.Get("/endless", [this](const httplib::Request&, httplib::Response& res) {
      start_event_stream(ctx_, res, [](EventSink& out) {
        for (int i = 0; i < 20000 && out.send("data: more\n\n"); ++i)
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
      });
    });
    port_ = http_.bind_to_any_port("127.0.0.1");
    ASSERT_GT(port_, 0);
    thread_ = std::thread([this] { http_.listen_after_bind(); });
    for (int i = 0; i < 500 && !http_.is_running(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  void TearDown() override {
    http_.stop();
    if (thread_.joinable()) thread_.join();
  }
  static ServerConfig config() {
    ServerConfig c;
    c.max_concurrent = 1;
    return c;
  }

  ServerContext ctx_{config()};
  httplib::Server http_;
  std::thread thread_;
  int port_ = 0;
};

TEST_F(EventStreamTest, AGenerationErrorIsTheLastEventAndTheServerGoesOn) {
  httplib::Client cli("127.0.0.1", port_);
  auto res = cli.Get("/throws");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/event-stream");
  EXPECT_EQ(res->body, "data: first\n\ndata: error the model broke\n\n");
  EXPECT_EQ(ctx_.metrics.active_generations.load(), 0);  // the slot was given back

  res = cli.Get("/ok");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->body, "data: slot free\n\n");
  EXPECT_EQ(ctx_.metrics.completion_tokens.load(), 5u);
  EXPECT_EQ(ctx_.metrics.streams.load(), 2u);
  EXPECT_EQ(ctx_.metrics.disconnects.load(), 0u);
}

TEST_F(EventStreamTest, AnExceptionOutOfTheEventsEndsTheStreamNotTheServer) {
  httplib::Client cli("127.0.0.1", port_);
  auto res = cli.Get("/breaks");  // the connection closes mid-body: a result or an error
  if (res) {
    EXPECT_EQ(res->body.rfind("data: first", 0), 0u);
  }
  res = cli.Get("/ok");
  ASSERT_TRUE(res) << "the server stopped serving";
  EXPECT_EQ(res->body, "data: slot free\n\n");
}

TEST_F(EventStreamTest, AClientThatHangsUpIsCountedAsADisconnect) {
  httplib::Client cli("127.0.0.1", port_);
  int chunks = 0;
  auto res = cli.Get("/endless", [&](const char*, size_t) { return ++chunks < 3; });
  EXPECT_FALSE(res);  // the receiver stopped it
  for (int i = 0; i < 2500 && ctx_.metrics.disconnects.load() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_EQ(ctx_.metrics.disconnects.load(), 1u);
  res = cli.Get("/ok");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->body, "data: slot free\n\n");
}

}  // namespace
}  // namespace channel::server
