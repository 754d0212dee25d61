// OpenAI-shaped API errors (api_error.h).
#include "server/api_error.h"

namespace channel::server {
namespace {
std::string type_for(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: return "server_overloaded";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}
}  // namespace

ApiError::ApiError(int status_, std::string message, std::string param_, std::string code_)
    : std::runtime_error(std::move(message)),
      status(status_),
      type(type_for(status_)),
      param(std::move(param_)),
      code(std::move(code_)) {}

nlohmann::json ApiError::to_json() const {
  nlohmann::json e = {{"message", what()}, {"type", type}};
  e["param"] = param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param);
  e["code"] = code.empty() ? nlohmann::json(nullptr) : nlohmann::json(code);
  return {{"error", e}};
}

nlohmann::json ApiError::to_anthropic_json() const {
  std::string t = type;
  if (status == 503) t = "overloaded_error";
  if (status >= 500 && status != 503) t = "api_error";
  return {{"type", "error"}, {"error", {{"type", t}, {"message", what()}}}};
}

void bad_request(std::string message, std::string param, std::string code) {
  throw ApiError(400, std::move(message), std::move(param), std::move(code));
}

}  // namespace channel::server
