// Reading a request body's fields: absent and null are the same (OpenAI's clients send
// null for an unset field).
#pragma once

#include <nlohmann/json.hpp>

namespace channel::server {

// obj[name], or null when it is absent or JSON null.
inline const nlohmann::json* field(const nlohmann::json& obj, const char* name) {
  const auto it = obj.find(name);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

}  // namespace channel::server
