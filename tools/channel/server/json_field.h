// Reading a request body's fields: absent and null are the same (OpenAI's clients send
// null for an unset field).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "server/api_error.h"

namespace channel::server {

// obj[name], or null when it is absent or JSON null.
inline const nlohmann::json* field(const nlohmann::json& obj, const char* name) {
  const auto it = obj.find(name);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

// obj[name], which must be a string: else a 400 naming param.name.
inline std::string required_string(const nlohmann::json& obj, const char* name,
                                   const std::string& param) {
  const nlohmann::json* v = field(obj, name);
  if (!v || !v->is_string())
    bad_request(std::string(name) + " must be a string", param + "." + name);
  return v->get<std::string>();
}

}  // namespace channel::server
