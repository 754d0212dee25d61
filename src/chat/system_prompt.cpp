// System prompt files with YAML front matter (system_prompt.h), read with yaml-cpp.
#include "chat/system_prompt.h"

#include <fstream>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "chat/chat_formatter.h"
#include "util/error.h"

namespace channel {
namespace {

struct Located {
  std::string source;
  int first_line = 1;  // the file line of the front matter's first line
  [[noreturn]] void fail(const YAML::Mark& mark, const std::string& what) const {
    const int line = mark.is_null() ? first_line : first_line + mark.line;
    throw_error("{}:{}: {}", source, line, what);
  }
};

// [A-Za-z_][A-Za-z0-9_.-]{0,63}
bool is_tool_name(const std::string& s) {
  auto alpha = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; };
  if (s.empty() || s.size() > 64 || !alpha(s[0])) return false;
  for (char c : s)
    if (!alpha(c) && !(c >= '0' && c <= '9') && c != '.' && c != '-') return false;
  return true;
}

// [-+]?[0-9]+
bool is_yaml_int(const std::string& s) {
  size_t i = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
  if (i == s.size()) return false;
  for (; i < s.size(); ++i)
    if (s[i] < '0' || s[i] > '9') return false;
  return true;
}

// [-+]?([0-9]+.[0-9]*|.[0-9]+|[0-9]+)([eE][-+]?[0-9]+)?  (no std::regex: see json_prefix.cpp)
bool is_yaml_float(const std::string& s) {
  auto digits = [&](size_t& i) {
    const size_t b = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    return i - b;
  };
  size_t i = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
  size_t mantissa = digits(i);
  if (i < s.size() && s[i] == '.') {
    ++i;
    mantissa += digits(i);
  }
  if (mantissa == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    if (digits(i) == 0) return false;
  }
  return i == s.size();
}

// A plain YAML scalar read by the core schema: null, booleans, integers and floats as such,
// anything quoted or otherwise a string.
OrderedJson scalar_to_json(const YAML::Node& n) {
  const std::string& s = n.Scalar();
  if (n.Tag() == "!") return s;  // quoted
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  if (is_yaml_int(s)) {
    try {
      return std::stoll(s);
    } catch (const std::exception&) {
      return s;
    }
  }
  if (is_yaml_float(s)) {
    try {
      return std::stod(s);
    } catch (const std::exception&) {
      return s;
    }
  }
  return s;
}

OrderedJson yaml_to_json(const YAML::Node& n, const Located& at, int depth = 0) {
  if (depth > 64) at.fail(n.Mark(), "front matter nests deeper than 64 levels");
  switch (n.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined: return nullptr;
    case YAML::NodeType::Scalar: return scalar_to_json(n);
    case YAML::NodeType::Sequence: {
      OrderedJson a = OrderedJson::array();
      for (const YAML::Node& item : n) a.push_back(yaml_to_json(item, at, depth + 1));
      return a;
    }
    case YAML::NodeType::Map: {
      OrderedJson o = OrderedJson::object();
      for (const auto& kv : n) {
        if (!kv.first.IsScalar()) at.fail(kv.first.Mark(), "a mapping key must be a plain value");
        o[kv.first.Scalar()] = yaml_to_json(kv.second, at, depth + 1);
      }
      return o;
    }
  }
  return nullptr;
}

const std::set<std::string>& schema_types() {
  static const std::set<std::string> t = {"object", "array",   "string", "number",
                                          "integer", "boolean", "null"};
  return t;
}

std::string schema_problem(const OrderedJson& s, const std::string& path, int depth) {
  if (depth > 32) return path + " nests too deep";
  if (!s.is_object()) return path + " is not a schema (a mapping)";
  if (s.contains("type")) {
    const OrderedJson& t = s["type"];
    const auto known = [](const OrderedJson& v) {
      return v.is_string() && schema_types().count(v.get<std::string>()) > 0;
    };
    if (t.is_array()) {
      if (t.empty()) return path + ".type is an empty list";
      for (const auto& v : t)
        if (!known(v)) return path + ".type names an unknown type";
    } else if (!known(t)) {
      return path + ".type is not one of object, array, string, number, integer, boolean, null";
    }
  }
  if (s.contains("properties")) {
    const OrderedJson& p = s["properties"];
    if (!p.is_object()) return path + ".properties is not a mapping";
    for (auto it = p.begin(); it != p.end(); ++it) {
      const std::string problem = schema_problem(it.value(), path + ".properties." + it.key(), depth + 1);
      if (!problem.empty()) return problem;
    }
  }
  if (s.contains("items")) {
    const std::string problem = schema_problem(s["items"], path + ".items", depth + 1);
    if (!problem.empty()) return problem;
  }
  if (s.contains("required")) {
    const OrderedJson& r = s["required"];
    if (!r.is_array()) return path + ".required is not a list";
    for (const auto& v : r) {
      if (!v.is_string()) return path + ".required holds a value that is not a name";
      if (s.contains("properties") && !s["properties"].contains(v.get<std::string>()))
        return path + ".required names '" + v.get<std::string>() + "', which is not a property";
    }
  }
  if (s.contains("enum") && !s["enum"].is_array()) return path + ".enum is not a list";
  if (s.contains("description") && !s["description"].is_string())
    return path + ".description is not text";
  return "";
}

ToolSpec read_tool(const YAML::Node& n, const Located& at, std::set<std::string>& names) {
  if (!n.IsMap()) at.fail(n.Mark(), "a tool must be a mapping with name, description, parameters");
  ToolSpec t;
  bool has_name = false;
  for (const auto& kv : n) {
    const std::string key = kv.first.Scalar();
    if (key == "name") {
      if (!kv.second.IsScalar() || kv.second.Scalar().empty())
        at.fail(kv.second.Mark(), "tool name must be a non-empty text");
      t.name = kv.second.Scalar();
      if (!is_tool_name(t.name))
        at.fail(kv.second.Mark(), "tool name '" + t.name +
                                      "' must be letters, digits, _ . - (at most 64, not "
                                      "starting with a digit)");
      has_name = true;
    } else if (key == "description") {
      if (!kv.second.IsScalar()) at.fail(kv.second.Mark(), "tool description must be text");
      t.description = kv.second.Scalar();
    } else if (key == "parameters") {
      t.parameters = yaml_to_json(kv.second, at);
      std::string problem = json_schema_problem(t.parameters);
      if (!problem.empty()) at.fail(kv.second.Mark(), "parameters are not a JSON schema: " + problem);
    } else {
      at.fail(kv.first.Mark(), "unknown tool key '" + key + "' (name, description, parameters)");
    }
  }
  if (!has_name) at.fail(n.Mark(), "a tool without a name");
  if (!names.insert(t.name).second) at.fail(n.Mark(), "tool '" + t.name + "' is defined twice");
  if (!t.parameters.contains("type")) {
    // No parameters: a tool that takes none, as an empty object schema.
    if (t.parameters.empty()) t.parameters = OrderedJson{{"type", "object"}, {"properties", OrderedJson::object()}};
  }
  return t;
}

}  // namespace

std::string json_schema_problem(const OrderedJson& schema) {
  if (!schema.is_object()) return "parameters must be a mapping (an object schema)";
  if (!schema.contains("type") || schema["type"] != "object")
    return "parameters must have type: object";
  return schema_problem(schema, "parameters", 0);
}

SystemPrompt parse_system_prompt(std::string_view content, std::string_view source) {
  SystemPrompt sp;
  const auto line_end = [&](size_t from) {
    const size_t e = content.find('\n', from);
    return e == content.npos ? content.size() : e;
  };
  const auto is_fence = [&](size_t b, size_t e) {
    std::string_view l = content.substr(b, e - b);
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    return l == "---";
  };
  size_t first_end = line_end(0);
  if (!is_fence(0, first_end)) {
    sp.text = std::string(trim_whitespace(content));
    return sp;
  }
  // Find the closing fence.
  size_t pos = first_end + 1;
  size_t close = content.npos;
  while (pos < content.size()) {
    const size_t e = line_end(pos);
    if (is_fence(pos, e)) {
      close = pos;
      break;
    }
    pos = e + 1;
  }
  if (close == content.npos)
    throw_error("{}:1: front matter opened with --- is never closed by a --- line", source);
  const Located at{std::string(source), 2};
  const std::string yaml(content.substr(first_end + 1, close - (first_end + 1)));
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    at.fail(e.mark, "bad YAML: " + e.msg);
  }
  const size_t body = std::min(content.size(), line_end(close) + 1);
  sp.text = std::string(trim_whitespace(content.substr(body)));
  if (root.IsNull()) return sp;
  if (!root.IsMap()) at.fail(root.Mark(), "front matter must be a mapping (tools: ...)");
  std::set<std::string> names;
  try {
    for (const auto& kv : root) {
      const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "";
      if (key != "tools") at.fail(kv.first.Mark(), "unknown front matter key '" + key + "' (tools)");
      if (kv.second.IsNull()) continue;
      if (!kv.second.IsSequence()) at.fail(kv.second.Mark(), "tools must be a list");
      for (const YAML::Node& t : kv.second) sp.tools.push_back(read_tool(t, at, names));
    }
  } catch (const YAML::Exception& e) {
    at.fail(e.mark, "bad YAML: " + e.msg);
  }
  return sp;
}

SystemPrompt read_system_prompt_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_error("{}: cannot open the system prompt file", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_system_prompt(ss.str(), path);
}

}  // namespace channel
