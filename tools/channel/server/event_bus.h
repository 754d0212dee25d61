// EventBus: live events for the web view (tokens as they flow, turns, the ring's state),
// fanned out to every /v1/events subscriber. A slow subscriber loses its oldest events
// rather than holding generation back.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace channel::server {

class EventBus {
 public:
  struct Subscriber {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::string> queue;  // SSE-framed events
    bool closed = false;
  };
  std::shared_ptr<Subscriber> subscribe();
  void unsubscribe(const std::shared_ptr<Subscriber>& s);
  void publish(const std::string& event, const nlohmann::json& data);
  void close_all();

 private:
  std::mutex mu_;
  std::vector<std::shared_ptr<Subscriber>> subs_;
};

}  // namespace channel::server
