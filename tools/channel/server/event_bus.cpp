// Fan-out of live events (event_bus.h).
#include "server/event_bus.h"

#include <algorithm>

namespace channel::server {

std::shared_ptr<EventBus::Subscriber> EventBus::subscribe() {
  auto s = std::make_shared<Subscriber>();
  std::lock_guard<std::mutex> lock(mu_);
  subs_.push_back(s);
  return s;
}

void EventBus::unsubscribe(const std::shared_ptr<Subscriber>& s) {
  std::lock_guard<std::mutex> lock(mu_);
  subs_.erase(std::remove(subs_.begin(), subs_.end(), s), subs_.end());
}

void EventBus::publish(const std::string& event, const nlohmann::json& data) {
  const std::string framed = "event: " + event + "\ndata: " +
                             data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n";
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& s : subs_) {
    {
      std::lock_guard<std::mutex> sl(s->mu);
      if (s->queue.size() >= 4096) s->queue.pop_front();
      s->queue.push_back(framed);
    }
    s->cv.notify_one();
  }
}

void EventBus::close_all() {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& s : subs_) {
    {
      std::lock_guard<std::mutex> sl(s->mu);
      s->closed = true;
    }
    s->cv.notify_all();
  }
}

}  // namespace channel::server
