// Reading /v1/messages bodies as chat completions (anthropic_request.h).
#include "server/anthropic_request.h"

#include <map>

#include "server/api_error.h"
#include "server/json_field.h"

namespace channel::server {
namespace {

using nlohmann::json;

// A string, or a list of text blocks, as one text.
std::string text_of(const json& c, const std::string& param) {
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) bad_request("content must be a string or a list of text blocks", param);
  std::string s;
  for (size_t k = 0; k < c.size(); ++k) {
    const std::string at = param + "[" + std::to_string(k) + "]";
    if (!c[k].is_object() || required_string(c[k], "type", at) != "text")
      bad_request("only text blocks are supported here", at);
    s += required_string(c[k], "text", at);
  }
  return s;
}

std::string chat_param(const std::string& p) {
  const auto starts = [&](const char* x) { return p.rfind(x, 0) == 0; };
  if (starts("stop")) return "stop_sequences";
  if (starts("tools[")) {
    std::string q = p;
    if (const size_t f = q.find(".function.parameters"); f != std::string::npos)
      q.replace(f, 20, ".input_schema");
    else if (const size_t g = q.find(".function"); g != std::string::npos)
      q.erase(g, 9);
    return q;
  }
  return p;
}

}  // namespace

ChatRequest parse_anthropic_request(const json& body, const SamplerConfig& defaults,
                                    int default_max_tokens) {
  if (!body.is_object()) bad_request("the body must be a JSON object");
  json chat = {{"messages", json::array()}};
  json& out = chat["messages"];
  if (const json* s = field(body, "system"))
    out.push_back({{"role", "system"}, {"content", text_of(*s, "system")}});
  const json* messages = field(body, "messages");
  if (!messages || !messages->is_array() || messages->empty())
    bad_request("messages must be a non-empty list", "messages");
  std::map<std::string, std::string> names;  // tool_use id -> tool name
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    const std::string param = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) bad_request("a message must be an object", param);
    const std::string role = required_string(m, "role", param);
    if (role != "user" && role != "assistant")
      bad_request("role must be user or assistant", param + ".role");
    const json* c = field(m, "content");
    if (!c) bad_request("content is required", param + ".content");
    if (c->is_string()) {
      out.push_back({{"role", role}, {"content", *c}});
      continue;
    }
    if (!c->is_array())
      bad_request("content must be a string or a list of blocks", param + ".content");
    std::string text;
    json calls = json::array();
    for (size_t k = 0; k < c->size(); ++k) {
      const json& b = (*c)[k];
      const std::string at = param + ".content[" + std::to_string(k) + "]";
      if (!b.is_object()) bad_request("a content block must be an object", at);
      const std::string type = required_string(b, "type", at);
      if (type == "text") {
        text += required_string(b, "text", at);
      } else if (type == "tool_use" && role == "assistant") {
        const std::string id = required_string(b, "id", at), name = required_string(b, "name", at);
        const json* input = field(b, "input");
        if (input && !input->is_object()) bad_request("input must be an object", at + ".input");
        names[id] = name;
        calls.push_back(
            {{"id", id},
             {"type", "function"},
             {"function",
              {{"name", name}, {"arguments", (input ? *input : json::object()).dump()}}}});
      } else if (type == "tool_result" && role == "user") {
        const std::string id = required_string(b, "tool_use_id", at);
        const auto named = names.find(id);
        if (named == names.end())
          bad_request("no tool_use with id '" + id + "' comes before it", at + ".tool_use_id");
        const json* content = field(b, "content");
        std::string result = content ? text_of(*content, at + ".content") : "";
        if (const json* e = field(b, "is_error"); e && e->is_boolean() && e->get<bool>())
          result = "Error: " + result;
        out.push_back(
            {{"role", "tool"}, {"tool_call_id", id}, {"name", named->second}, {"content", result}});
      } else if (type == "thinking" || type == "redacted_thinking") {
        continue;  // another model's reasoning: nothing this model reads
      } else {
        bad_request(
            "content blocks of type '" + type + "' are not supported in a " + role + " message",
            at + ".type");
      }
    }
    if (role == "assistant") {
      json a = {{"role", "assistant"},
                {"content", calls.empty() || !text.empty() ? json(text) : json(nullptr)}};
      if (!calls.empty()) a["tool_calls"] = calls;
      out.push_back(a);
    } else if (!text.empty() || out.empty() || out.back()["role"] != "tool") {
      out.push_back({{"role", "user"}, {"content", text}});
    }
  }
  const json* max = field(body, "max_tokens");
  if (!max) bad_request("max_tokens is required", "max_tokens");
  chat["max_tokens"] = *max;
  (void)default_max_tokens;
  for (const char* k : {"model", "stream", "temperature", "top_p"})
    if (const json* v = field(body, k)) chat[k] = *v;
  if (const json* v = field(body, "stop_sequences")) chat["stop"] = *v;
  if (const json* v = field(body, "tools")) {
    if (!v->is_array()) bad_request("tools must be a list", "tools");
    json tools = json::array();
    for (size_t i = 0; i < v->size(); ++i) {
      const json& t = (*v)[i];
      const std::string param = "tools[" + std::to_string(i) + "]";
      if (!t.is_object() || (field(t, "type") && (*field(t, "type")) != "custom"))
        bad_request("only client tools ({name, description, input_schema}) are supported", param);
      json fn = {{"name", field(t, "name") ? t["name"] : json(nullptr)}};
      if (const json* d = field(t, "description")) fn["description"] = *d;
      if (const json* s = field(t, "input_schema")) fn["parameters"] = *s;
      tools.push_back({{"type", "function"}, {"function", fn}});
    }
    chat["tools"] = tools;
  }
  if (const json* v = field(body, "tool_choice")) {
    if (!v->is_object()) bad_request("tool_choice must be an object with a type", "tool_choice");
    const std::string type = required_string(*v, "type", "tool_choice");
    if (type == "auto" || type == "none") {
      chat["tool_choice"] = type;
    } else if (type == "any") {
      chat["tool_choice"] = "required";
    } else if (type == "tool") {
      chat["tool_choice"] = {{"type", "function"},
                             {"function", {{"name", required_string(*v, "name", "tool_choice")}}}};
    } else {
      bad_request("tool_choice type must be auto, any, tool or none", "tool_choice.type");
    }
  }
  ChatRequest r;
  try {
    r = parse_chat_request(chat, defaults, default_max_tokens);
  } catch (ApiError& e) {
    e.param = chat_param(e.param);
    throw;
  }
  if (const json* v = field(body, "top_k")) {
    if (!v->is_number_integer() || v->get<int64_t>() < 0 || v->get<int64_t>() > (1 << 30))
      bad_request("top_k must be a non-negative integer", "top_k");
    r.params.sampling.top_k = static_cast<int32_t>(v->get<int64_t>());
  }
  return r;
}

}  // namespace channel::server
