// Named server-side sessions (session_registry.h).
#include "server/session_registry.h"

#include <algorithm>
#include <filesystem>

#include "server/api_error.h"
#include "server/openai_request.h"
#include "util/error.h"

namespace channel::server {

using nlohmann::json;

json NamedSession::state() {
  json j = session_state_json(*chat, spans);
  j["name"] = name;
  return j;
}

std::unique_lock<std::mutex> lock_session(NamedSession& s) {
  std::unique_lock<std::mutex> lock(s.mu, std::try_to_lock);
  if (!lock.owns_lock())
    throw ApiError(409, "session '" + s.name + "' is busy with another request", "", "session_busy");
  return lock;
}

std::string SessionRegistry::session_path(const std::string& name) const {
  if (config_.data_dir.empty()) bad_request("the server was started without --data-dir");
  return (std::filesystem::path(config_.data_dir) / (name + ".session")).string();
}

std::string SessionRegistry::memory_path(const std::string& name) const {
  if (config_.data_dir.empty()) bad_request("memory needs a server started with --data-dir", "memory");
  return (std::filesystem::path(config_.data_dir) / (name + ".mem")).string();
}

ChatConfig SessionRegistry::config_for(const std::string& name, const json& body) const {
  ChatConfig c = config_.chat;
  if (body.contains("system") && !body["system"].is_null()) {
    if (!body["system"].is_string()) bad_request("system must be a string", "system");
    c.system.text = body["system"].get<std::string>();
  }
  if (body.contains("tools") && !body["tools"].is_null()) c.system.tools = parse_tools(body["tools"]);
  if (body.contains("memory") && !body["memory"].is_null()) {
    if (!body["memory"].is_boolean()) bad_request("memory must be a boolean", "memory");
    c.memory_path = body["memory"].get<bool>() ? memory_path(name) : "";
  } else {
    c.memory_path.clear();
  }
  return c;
}

std::shared_ptr<NamedSession> SessionRegistry::create(const json& body) {
  if (!body.is_object()) bad_request("the body must be a JSON object");
  if (!body.contains("name") || !body["name"].is_string()) bad_request("name is required", "name");
  const std::string name = body["name"].get<std::string>();
  // 1 to 64 of [A-Za-z0-9_-] (checked by hand: GCC 12's std::regex trips -Wmaybe-uninitialized
  // in the sanitizer build).
  const bool ok =
      !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '-';
      });
  if (!ok) bad_request("name must be 1 to 64 of A-Z a-z 0-9 _ -", "name");
  const ChatConfig config = config_for(name, body);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (sessions_.count(name)) throw ApiError(400, "session '" + name + "' exists", "name", "session_exists");
    if (static_cast<int>(sessions_.size()) >= config_.max_sessions)
      throw ApiError(429, "the server holds its maximum of " + std::to_string(config_.max_sessions) +
                              " sessions; delete one first", "", "too_many_sessions");
  }
  auto s = std::make_shared<NamedSession>();
  s->name = name;
  try {
    s->chat = std::make_unique<ChatSession>(config_.model, config);
  } catch (const Error& e) {
    bad_request(e.what());
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (sessions_.count(name)) throw ApiError(400, "session '" + name + "' exists", "name", "session_exists");
  if (static_cast<int>(sessions_.size()) >= config_.max_sessions)
    throw ApiError(429, "the server holds its maximum of sessions", "", "too_many_sessions");
  sessions_[name] = s;
  metrics_.named_sessions = static_cast<int64_t>(sessions_.size());
  events_.publish("session", {{"name", name}, {"created", true}});
  return s;
}

std::shared_ptr<NamedSession> SessionRegistry::get(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = sessions_.find(name);
  if (it == sessions_.end()) throw ApiError(404, "no session named '" + name + "'", "", "session_not_found");
  return it->second;
}

void SessionRegistry::remove(const std::string& name) {
  std::shared_ptr<NamedSession> s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = sessions_.find(name);
    if (it == sessions_.end()) throw ApiError(404, "no session named '" + name + "'", "", "session_not_found");
    s = it->second;
    sessions_.erase(it);
    metrics_.named_sessions = static_cast<int64_t>(sessions_.size());
  }
  events_.publish("session", {{"name", name}, {"deleted", true}});
  // A request still running keeps its shared_ptr; the session ends with the last one.
}

std::vector<std::string> SessionRegistry::names() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> n;
  for (const auto& [k, v] : sessions_) n.push_back(k);
  return n;
}

}  // namespace channel::server
