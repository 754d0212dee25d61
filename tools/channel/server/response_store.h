// The responses /v1/responses kept for previous_response_id and GET /v1/responses/{id}:
// each one's response object and its conversation (chat messages, its output included), in
// memory, the newest `capacity` of them (older ones are dropped first). Thread-safe.
#pragma once

#include <deque>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace channel::server {

class ResponseStore {
 public:
  explicit ResponseStore(size_t capacity) : capacity_(capacity) {}
  struct Entry {
    std::string id;
    nlohmann::json response;
    nlohmann::json conversation;  // chat messages, no system message
  };
  void put(Entry e);
  std::optional<Entry> get(const std::string& id) const;
  bool remove(const std::string& id);

 private:
  size_t capacity_;
  mutable std::mutex mu_;
  std::deque<Entry> entries_;  // oldest first
};

}  // namespace channel::server
