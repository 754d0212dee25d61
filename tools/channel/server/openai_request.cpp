// Parsing OpenAI request bodies (openai_request.h).
#include "server/openai_request.h"

#include <cstdint>

#include "chat/json_prefix.h"
#include "chat/system_prompt.h"
#include "server/api_error.h"
#include "server/json_depth.h"
#include "server/json_field.h"

namespace channel::server {
namespace {

using nlohmann::json;

// obj[name] as a string ("" when absent or null); anything else is a 400 naming param.name.
std::string string_field(const json& obj, const char* name, const std::string& param) {
  const json* v = field(obj, name);
  if (!v) return "";
  if (!v->is_string()) bad_request(std::string(name) + " must be a string", param + "." + name);
  return v->get<std::string>();
}

// Message content: a string, or an array of {"type": "text", "text": ...} parts.
std::string content_text(const json& c, const std::string& param) {
  if (c.is_null()) return "";
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) bad_request("content must be a string or an array of text parts", param);
  std::string s;
  for (const json& part : c) {
    if (!part.is_object() || string_field(part, "type", param) != "text" ||
        !part.contains("text") || !part["text"].is_string()) {
      bad_request("only text content parts are supported", param);
    }
    s += part["text"].get<std::string>();
  }
  return s;
}

ToolCall parse_tool_call(const json& c, const std::string& param) {
  if (!c.is_object() || !c.contains("function") || !c["function"].is_object())
    bad_request("a tool call needs a function object", param);
  const json& fn = c["function"];
  ToolCall t;
  t.id = string_field(c, "id", param);
  if (!fn.contains("name") || !fn["name"].is_string()) bad_request("a tool call needs a name", param + ".function.name");
  t.name = fn["name"].get<std::string>();
  if (fn.contains("arguments")) {
    const json& a = fn["arguments"];
    if (a.is_string()) {
      t.arguments = OrderedJson::parse(a.get<std::string>(), nullptr, false);
      if (!t.arguments.is_object()) bad_request("arguments must be a JSON object", param + ".function.arguments");
      check_json_depth(t.arguments, "arguments", param + ".function.arguments");
    } else if (a.is_object()) {
      t.arguments = OrderedJson::parse(a.dump());
    } else {
      bad_request("arguments must be a JSON object", param + ".function.arguments");
    }
  }
  return t;
}

// min_tokens: the least max_tokens a request may ask for (1, or 0 for a completion that
// only echoes and scores its prompt).
GenerationParams parse_params(const json& body, const SamplerConfig& defaults,
                              int default_max_tokens, int min_tokens = 1) {
  GenerationParams p;
  p.sampling = defaults;
  p.max_tokens = default_max_tokens;
  if (const json* m = field(body, "model")) {
    if (!m->is_string()) bad_request("model must be a string", "model");
    p.model = m->get<std::string>();
  }
  if (const json* s = field(body, "stream")) {
    if (!s->is_boolean()) bad_request("stream must be a boolean", "stream");
    p.stream = s->get<bool>();
  }
  if (const json* so = field(body, "stream_options")) {
    if (!so->is_object()) bad_request("stream_options must be an object", "stream_options");
    if (const json* u = field(*so, "include_usage")) {
      if (!u->is_boolean())
        bad_request("include_usage must be a boolean", "stream_options.include_usage");
      p.include_usage = u->get<bool>();
    }
  }
  for (const char* name : {"max_tokens", "max_completion_tokens"}) {
    if (const json* v = field(body, name)) {
      if (!v->is_number_integer() || v->get<int64_t>() < min_tokens ||
          v->get<int64_t>() > (1 << 20))
        bad_request(std::string(name) + " must be an integer from " + std::to_string(min_tokens) +
                        " to 1048576",
                    name);
      p.max_tokens = static_cast<int>(v->get<int64_t>());
    }
  }
  if (const json* v = field(body, "temperature")) {
    if (!v->is_number() || v->get<double>() < 0 || v->get<double>() > 2)
      bad_request("temperature must be a number from 0 to 2", "temperature");
    p.sampling.temperature = v->get<float>();
  }
  if (const json* v = field(body, "top_p")) {
    if (!v->is_number() || v->get<double>() <= 0 || v->get<double>() > 1)
      bad_request("top_p must be a number in (0, 1]", "top_p");
    p.sampling.top_p = v->get<float>();
  }
  for (const char* name : {"presence_penalty", "frequency_penalty"}) {
    if (const json* v = field(body, name)) {
      if (!v->is_number() || !(v->get<double>() >= -2 && v->get<double>() <= 2))
        bad_request(std::string(name) + " must be a number from -2 to 2", name);
      (std::string(name) == "presence_penalty" ? p.sampling.presence_penalty
                                               : p.sampling.frequency_penalty) = v->get<float>();
    }
  }
  if (const json* v = field(body, "logit_bias")) {
    if (!v->is_object())
      bad_request("logit_bias must be an object of token ids to numbers", "logit_bias");
    if (v->size() > 300) bad_request("logit_bias takes at most 300 tokens", "logit_bias");
    p.sampling.logit_bias.clear();
    for (const auto& [key, bias] : v->items()) {
      const std::string param = "logit_bias." + key;
      const bool digits = !key.empty() && key.size() <= 9 &&
                          key.find_first_not_of("0123456789") == std::string::npos;
      if (!digits) bad_request("logit_bias keys must be token ids (non-negative integers)", param);
      if (!bias.is_number() || !(bias.get<double>() >= -100 && bias.get<double>() <= 100))
        bad_request("a logit bias must be a number from -100 to 100", param);
      p.sampling.logit_bias.push_back({static_cast<int32_t>(std::stol(key)), bias.get<float>()});
    }
  }
  if (const json* v = field(body, "seed")) {
    if (!v->is_number_integer()) bad_request("seed must be an integer", "seed");
    p.sampling.seed = static_cast<uint64_t>(v->get<int64_t>());
  }
  if (const json* v = field(body, "n")) {
    if (!v->is_number_integer() || v->get<int64_t>() != 1) bad_request("only n = 1 is supported", "n");
  }
  if (const json* v = field(body, "stop")) {
    if (v->is_string()) {
      p.stop.push_back(v->get<std::string>());
    } else if (v->is_array() && v->size() <= 4) {
      for (const json& s : *v) {
        if (!s.is_string()) bad_request("stop must be a string or up to 4 strings", "stop");
        p.stop.push_back(s.get<std::string>());
      }
    } else {
      bad_request("stop must be a string or up to 4 strings", "stop");
    }
  }
  if (const json* v = field(body, "response_format")) {
    if (!v->is_object() || !v->contains("type") || !(*v)["type"].is_string())
      bad_request("response_format must be an object with a type", "response_format");
    const std::string t = (*v)["type"].get<std::string>();
    if (t == "json_object") {
      p.json_object = true;
    } else if (t == "json_schema") {
      const json* js = field(*v, "json_schema");
      if (!js || !js->is_object() || !js->contains("schema"))
        bad_request("json_schema must be an object with a schema", "response_format.json_schema");
      auto schema = std::make_shared<OrderedJson>(OrderedJson::parse((*js)["schema"].dump()));
      const std::string problem = json_schema_constraint_problem(*schema);
      if (!problem.empty()) bad_request(problem, "response_format.json_schema.schema");
      p.json_object = true;
      p.json_schema = std::move(schema);
    } else if (t != "text") {
      bad_request("response_format type must be text, json_object or json_schema",
                  "response_format.type");
    }
  }
  return p;
}

}  // namespace

std::vector<ToolSpec> parse_tools(const json& tools) {
  if (!tools.is_array()) bad_request("tools must be an array", "tools");
  std::vector<ToolSpec> out;
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string param = "tools[" + std::to_string(i) + "]";
    const json& t = tools[i];
    if (!t.is_object() || string_field(t, "type", param) != "function" || !t.contains("function") ||
        !t["function"].is_object())
      bad_request("a tool must be {\"type\": \"function\", \"function\": {...}}", param);
    const json& fn = t["function"];
    ToolSpec s;
    if (!fn.contains("name") || !fn["name"].is_string() || fn["name"].get<std::string>().empty())
      bad_request("a tool needs a name", param + ".function.name");
    s.name = fn["name"].get<std::string>();
    if (fn.contains("description")) {
      if (!fn["description"].is_string()) bad_request("description must be a string", param + ".function.description");
      s.description = fn["description"].get<std::string>();
    }
    if (fn.contains("parameters")) {
      s.parameters = OrderedJson::parse(fn["parameters"].dump());
      const std::string problem = json_schema_problem(s.parameters);
      if (!problem.empty()) bad_request("parameters are not a JSON schema: " + problem, param + ".function.parameters");
    } else {
      s.parameters = OrderedJson{{"type", "object"}, {"properties", OrderedJson::object()}};
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<ChatMessage> parse_messages(const json& messages) {
  if (!messages.is_array() || messages.empty()) bad_request("messages must be a non-empty array", "messages");
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string param = "messages[" + std::to_string(i) + "]";
    const json& m = messages[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      bad_request("a message needs a role", param + ".role");
    const std::string role = m["role"].get<std::string>();
    ChatMessage cm;
    if (role == "system" || role == "developer") {
      cm.role = ChatRole::system;
    } else if (role == "user") {
      cm.role = ChatRole::user;
    } else if (role == "assistant") {
      cm.role = ChatRole::assistant;
    } else if (role == "tool") {
      cm.role = ChatRole::tool;
    } else {
      bad_request("unknown role '" + role + "'", param + ".role");
    }
    cm.content = content_text(m.contains("content") ? m["content"] : json(nullptr), param + ".content");
    if (cm.role == ChatRole::assistant && m.contains("tool_calls") && !m["tool_calls"].is_null()) {
      if (!m["tool_calls"].is_array()) bad_request("tool_calls must be an array", param + ".tool_calls");
      for (size_t k = 0; k < m["tool_calls"].size(); ++k)
        cm.tool_calls.push_back(parse_tool_call(m["tool_calls"][k], param + ".tool_calls[" + std::to_string(k) + "]"));
    } else if (!m.contains("content") || m["content"].is_null()) {
      bad_request("content is required", param + ".content");
    }
    if (cm.role == ChatRole::tool) {
      cm.tool_call_id = string_field(m, "tool_call_id", param);
      cm.name = string_field(m, "name", param);
    }
    if (cm.role == ChatRole::system && i != 0) bad_request("a system message is only allowed first", param + ".role");
    out.push_back(std::move(cm));
  }
  return out;
}

ChatRequest parse_chat_request(const json& body, const SamplerConfig& defaults, int default_max_tokens) {
  if (!body.is_object()) bad_request("the body must be a JSON object");
  ChatRequest r;
  r.params = parse_params(body, defaults, default_max_tokens);
  if (!body.contains("messages")) bad_request("messages is required", "messages");
  r.messages = parse_messages(body["messages"]);
  bool logprobs = false;
  if (const json* v = field(body, "logprobs")) {
    if (!v->is_boolean()) bad_request("logprobs must be a boolean", "logprobs");
    logprobs = v->get<bool>();
  }
  if (logprobs) r.params.logprobs = 0;
  if (const json* v = field(body, "top_logprobs")) {
    if (!v->is_number_integer() || v->get<int64_t>() < 0 || v->get<int64_t>() > 20)
      bad_request("top_logprobs must be an integer from 0 to 20", "top_logprobs");
    if (!logprobs) bad_request("top_logprobs needs logprobs: true", "top_logprobs");
    r.params.logprobs = static_cast<int>(v->get<int64_t>());
  }
  if (const json* t = field(body, "tools")) r.tools = parse_tools(*t);
  if (const json* tc = field(body, "tool_choice")) {
    if (tc->is_string()) {
      const std::string s = tc->get<std::string>();
      if (s == "none") {
        r.tool_choice = ToolChoice::none;
      } else if (s == "auto") {
        r.tool_choice = ToolChoice::auto_;
      } else if (s == "required") {
        r.tool_choice = ToolChoice::required;
      } else {
        bad_request("tool_choice must be none, auto, required or a function", "tool_choice");
      }
    } else if (tc->is_object() && tc->contains("function") && (*tc)["function"].is_object() &&
               (*tc)["function"].contains("name") && (*tc)["function"]["name"].is_string()) {
      r.tool_choice = ToolChoice::named;
      r.tool_name = (*tc)["function"]["name"].get<std::string>();
    } else {
      bad_request("tool_choice must be none, auto, required or a function", "tool_choice");
    }
    if (r.tool_choice != ToolChoice::none && r.tool_choice != ToolChoice::auto_ && r.tools.empty())
      bad_request("tool_choice needs tools", "tool_choice");
    if (r.tool_choice == ToolChoice::named) {
      bool found = false;
      for (const ToolSpec& t : r.tools) found |= t.name == r.tool_name;
      if (!found) bad_request("tool_choice names a function that is not in tools", "tool_choice");
    }
  }
  return r;
}

CompletionRequest parse_completion_request(const json& body, const SamplerConfig& defaults,
                                           int default_max_tokens) {
  if (!body.is_object()) bad_request("the body must be a JSON object");
  CompletionRequest r;
  r.params = parse_params(body, defaults, default_max_tokens, 0);
  const json* p = field(body, "prompt");
  if (!p) bad_request("prompt is required", "prompt");
  // A string, token ids, or a list of one of either (several prompts: several requests).
  const json* one = p->is_array() && p->size() == 1 && !(*p)[0].is_number() ? &(*p)[0] : p;
  if (one->is_string()) {
    r.prompt = one->get<std::string>();
  } else if (one->is_array() && !one->empty() && (*one)[0].is_number()) {
    r.prompt_is_ids = true;
    for (const json& t : *one) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > INT32_MAX)
        bad_request("a token id must be a non-negative integer", "prompt");
      r.prompt_ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
  } else if (p->is_array() && p->size() > 1) {
    bad_request("one prompt per request (send each prompt as its own request)", "prompt");
  } else {
    bad_request("prompt must be a string or a list of token ids", "prompt");
  }
  if (const json* e = field(body, "echo")) {
    if (!e->is_boolean()) bad_request("echo must be a boolean", "echo");
    r.echo = e->get<bool>();
  }
  if (const json* v = field(body, "logprobs")) {
    if (!v->is_number_integer() || v->get<int64_t>() < 0 || v->get<int64_t>() > 5)
      bad_request("logprobs must be an integer from 0 to 5", "logprobs");
    r.params.logprobs = static_cast<int>(v->get<int64_t>());
  }
  return r;
}

void check_logit_bias(const GenerationParams& params, int32_t n_vocab) {
  for (const LogitEdit& e : params.sampling.logit_bias)
    if (e.id >= n_vocab)
      bad_request("token " + std::to_string(e.id) + " is outside the vocabulary (" +
                      std::to_string(n_vocab) + " tokens)",
                  "logit_bias." + std::to_string(e.id));
}

}  // namespace channel::server
