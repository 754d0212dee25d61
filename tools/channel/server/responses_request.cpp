// Reading /v1/responses bodies as chat completions (responses_request.h).
#include "server/responses_request.h"

#include <map>

#include "server/api_error.h"
#include "server/json_field.h"

namespace channel::server {
namespace {

using nlohmann::json;

// A message item's content: a string or a list of text parts (input_text, output_text).
std::string item_text(const json& c, const std::string& param) {
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) bad_request("content must be a string or a list of text parts", param);
  std::string s;
  for (size_t k = 0; k < c.size(); ++k) {
    const json& part = c[k];
    const std::string at = param + "[" + std::to_string(k) + "]";
    const json* type = part.is_object() ? field(part, "type") : nullptr;
    if (!type || !type->is_string() ||
        (*type != "input_text" && *type != "output_text" && *type != "text"))
      bad_request("only text content parts (input_text, output_text) are supported", at);
    s += required_string(part, "text", at);
  }
  return s;
}

// Where a chat-completion field's error belongs in the Responses body.
std::string responses_param(const std::string& chat_param) {
  const auto starts = [&](const char* p) { return chat_param.rfind(p, 0) == 0; };
  if (starts("max_tokens")) return "max_output_tokens";
  if (starts("response_format.json_schema.schema")) return "text.format.schema";
  if (starts("response_format")) return "text.format";
  if (starts("messages")) return "input";
  if (starts("tools[")) {
    std::string p = chat_param;
    if (const size_t f = p.find(".function"); f != std::string::npos) p.erase(f, 9);
    return p;
  }
  return chat_param;
}

}  // namespace

std::string previous_response_id(const json& body) {
  if (!body.is_object()) bad_request("the body must be a JSON object");
  const json* v = field(body, "previous_response_id");
  if (!v) return "";
  if (!v->is_string() || v->get_ref<const std::string&>().empty())
    bad_request("previous_response_id must be a response id", "previous_response_id");
  return v->get<std::string>();
}

ResponsesRequest parse_responses_request(const json& body, const json& previous,
                                         const SamplerConfig& defaults, int default_max_tokens) {
  if (!body.is_object()) bad_request("the body must be a JSON object");
  ResponsesRequest r;
  r.previous_response_id = previous_response_id(body);
  std::string system;
  if (const json* v = field(body, "instructions")) {
    if (!v->is_string()) bad_request("instructions must be a string", "instructions");
    r.instructions = system = v->get<std::string>();
  }
  r.conversation = previous.is_array() ? previous : json::array();
  std::map<std::string, std::string> call_names;  // call_id -> function name
  for (const json& m : r.conversation)
    if (m.contains("tool_calls"))
      for (const json& c : m["tool_calls"]) call_names[c["id"]] = c["function"]["name"];
  const json* input = field(body, "input");
  if (!input) bad_request("input is required", "input");
  if (input->is_string()) {
    r.conversation.push_back({{"role", "user"}, {"content", *input}});
  } else if (input->is_array() && !input->empty()) {
    for (size_t i = 0; i < input->size(); ++i) {
      const json& item = (*input)[i];
      const std::string param = "input[" + std::to_string(i) + "]";
      if (!item.is_object()) bad_request("an input item must be an object", param);
      const json* t = field(item, "type");
      if (t && !t->is_string()) bad_request("type must be a string", param + ".type");
      const std::string type = t ? t->get<std::string>() : "message";
      if (type == "message") {
        const std::string role = required_string(item, "role", param);
        const json* c = field(item, "content");
        if (!c) bad_request("content is required", param + ".content");
        const std::string text = item_text(*c, param + ".content");
        if (role == "system" || role == "developer") {
          system += (system.empty() ? "" : "\n\n") + text;
        } else if (role == "user" || role == "assistant") {
          r.conversation.push_back({{"role", role}, {"content", text}});
        } else {
          bad_request("role must be user, assistant, system or developer", param + ".role");
        }
      } else if (type == "function_call") {
        const std::string call_id = required_string(item, "call_id", param);
        const std::string name = required_string(item, "name", param);
        const std::string arguments = required_string(item, "arguments", param);
        call_names[call_id] = name;
        const json call = {{"id", call_id},
                           {"type", "function"},
                           {"function", {{"name", name}, {"arguments", arguments}}}};
        // Calls right after an assistant message (or each other) are that message's.
        json& conv = r.conversation;
        if (conv.empty() || conv.back()["role"] != "assistant")
          conv.push_back(
              {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", json::array()}});
        if (!conv.back().contains("tool_calls")) conv.back()["tool_calls"] = json::array();
        conv.back()["tool_calls"].push_back(call);
      } else if (type == "function_call_output") {
        const std::string call_id = required_string(item, "call_id", param);
        const json* out = field(item, "output");
        if (!out) bad_request("output is required", param + ".output");
        const std::string text = item_text(*out, param + ".output");
        const auto named = call_names.find(call_id);
        if (named == call_names.end())
          bad_request("no function_call with call_id '" + call_id + "' comes before it",
                      param + ".call_id");
        r.conversation.push_back({{"role", "tool"},
                                  {"tool_call_id", call_id},
                                  {"name", named->second},
                                  {"content", text}});
      } else if (type == "reasoning") {
        continue;  // another model's reasoning summary: nothing this model reads
      } else {
        bad_request("input items of type '" + type +
                        "' are not supported (message, function_call, "
                        "function_call_output)",
                    param + ".type");
      }
    }
  } else {
    bad_request("input must be a string or a non-empty list of items", "input");
  }
  if (r.conversation.empty()) bad_request("input holds no message", "input");

  // The chat completion this amounts to.
  json chat = {{"messages", json::array()}};
  if (!system.empty()) chat["messages"].push_back({{"role", "system"}, {"content", system}});
  for (const json& m : r.conversation) chat["messages"].push_back(m);
  for (const char* k :
       {"model", "stream", "temperature", "top_p", "seed", "presence_penalty", "frequency_penalty"})
    if (const json* v = field(body, k)) chat[k] = *v;
  // Log-probabilities: include "message.output_text.logprobs" (other include values name
  // things this server does not keep, and are ignored) or top_logprobs.
  if (const json* v = field(body, "include")) {
    if (!v->is_array()) bad_request("include must be a list", "include");
    for (const json& x : *v)
      if (x == "message.output_text.logprobs") chat["logprobs"] = true;
  }
  if (const json* v = field(body, "top_logprobs")) {
    chat["logprobs"] = true;
    chat["top_logprobs"] = *v;
  }
  if (const json* v = field(body, "max_output_tokens")) {
    chat["max_tokens"] = *v;
    r.max_output_tokens = *v;
  }
  if (const json* v = field(body, "store")) {
    if (!v->is_boolean()) bad_request("store must be a boolean", "store");
    r.store = v->get<bool>();
  }
  if (const json* v = field(body, "metadata")) {
    if (!v->is_object()) bad_request("metadata must be an object", "metadata");
    r.metadata = *v;
  }
  if (const json* v = field(body, "tools")) {
    if (!v->is_array()) bad_request("tools must be an array", "tools");
    json tools = json::array();
    for (size_t i = 0; i < v->size(); ++i) {
      const json& t = (*v)[i];
      const std::string param = "tools[" + std::to_string(i) + "]";
      if (!t.is_object() || required_string(t, "type", param) != "function")
        bad_request("only function tools are supported", param + ".type");
      json fn = {{"name", field(t, "name") ? t["name"] : json(nullptr)}};
      for (const char* k : {"description", "parameters"})
        if (const json* x = field(t, k)) fn[k] = *x;
      tools.push_back({{"type", "function"}, {"function", fn}});
    }
    chat["tools"] = tools;
    r.tools = *v;
  }
  if (const json* v = field(body, "tool_choice")) {
    r.tool_choice = *v;
    if (v->is_object()) {  // {"type": "function", "name": ...}
      if (!field(*v, "type") || (*v)["type"] != "function")
        bad_request("tool_choice must be none, auto, required or a function", "tool_choice");
      chat["tool_choice"] = {{"type", "function"},
                             {"function", {{"name", required_string(*v, "name", "tool_choice")}}}};
    } else {
      chat["tool_choice"] = *v;
    }
  }
  if (const json* v = field(body, "text")) {
    if (!v->is_object()) bad_request("text must be an object", "text");
    if (const json* f = field(*v, "format")) {
      if (!f->is_object() || !field(*f, "type") || !(*f)["type"].is_string())
        bad_request("text.format must be an object with a type", "text.format");
      const std::string type = (*f)["type"];
      if (type == "json_object") {
        chat["response_format"] = {{"type", "json_object"}};
      } else if (type == "json_schema") {
        json js = {{"name", field(*f, "name") ? (*f)["name"] : json("response")}};
        if (const json* s = field(*f, "schema")) js["schema"] = *s;
        if (const json* s = field(*f, "strict")) js["strict"] = *s;
        chat["response_format"] = {{"type", "json_schema"}, {"json_schema", js}};
      } else if (type != "text") {
        bad_request("text.format type must be text, json_object or json_schema",
                    "text.format.type");
      }
      r.text = {{"format", *f}};
    }
  }
  try {
    r.chat = parse_chat_request(chat, defaults, default_max_tokens);
  } catch (ApiError& e) {
    e.param = responses_param(e.param);
    throw;
  }
  return r;
}

}  // namespace channel::server
