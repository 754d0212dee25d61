// Named sessions that live on the server: each a ChatSession (its ring, anchors and memory)
// that requests continue, one request at a time. At most --max-sessions exist (429 beyond);
// a name that does not exist is a 404. Saves and memories go to --data-dir.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/event_bus.h"
#include "server/metrics.h"
#include "server/server_config.h"
#include "server/session_state.h"

namespace channel::server {

struct NamedSession {
  std::string name;
  std::mutex mu;  // held by the request that uses the session
  std::unique_ptr<ChatSession> chat;
  nlohmann::json transcript = nlohmann::json::array();  // [{role, content[, tool_calls]}]
  std::vector<SpanRecord> spans;                        // for last_evicted
  nlohmann::json state();                               // under mu
};

class SessionRegistry {
 public:
  SessionRegistry(const ServerConfig& config, Metrics& metrics, EventBus& events)
      : config_(config), metrics_(metrics), events_(events) {}
  // body: {"name", "system"?, "tools"?, "memory"?: bool}
  std::shared_ptr<NamedSession> create(const nlohmann::json& body);
  std::shared_ptr<NamedSession> get(const std::string& name) const;
  void remove(const std::string& name);
  std::vector<std::string> names() const;
  // Paths in --data-dir (400 when the server has none).
  std::string session_path(const std::string& name) const;
  std::string memory_path(const std::string& name) const;
  ChatConfig config_for(const std::string& name, const nlohmann::json& body) const;

 private:
  const ServerConfig& config_;
  Metrics& metrics_;
  EventBus& events_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<NamedSession>> sessions_;
};

// Locks a session for one request, or answers 409 when another request holds it.
std::unique_lock<std::mutex> lock_session(NamedSession& s);

}  // namespace channel::server
