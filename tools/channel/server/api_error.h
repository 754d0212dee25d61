// An error of the HTTP API in OpenAI's shape:
//   {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}
// with its status (400 bad request, 401 no or wrong API key, 404 unknown model, session or
// route, 413 body too large, 429 too many sessions, 503 no free generation slot).
#pragma once

#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace channel::server {

struct ApiError : std::runtime_error {
  int status;
  std::string type;   // invalid_request_error, authentication_error, not_found_error, ...
  std::string param;  // the request field at fault, or ""
  std::string code;   // machine-readable: context_length_exceeded, model_not_found, ...
  ApiError(int status_, std::string message, std::string param_ = "", std::string code_ = "");
  nlohmann::json to_json() const;
  // Anthropic's shape, {"type": "error", "error": {"type", "message"}} (/v1/messages).
  nlohmann::json to_anthropic_json() const;
};

[[noreturn]] void bad_request(std::string message, std::string param = "", std::string code = "");

}  // namespace channel::server
