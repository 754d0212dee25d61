// Per-family tool call parsing (tool_call_parser.h).
#include "chat/tool_call_parser.h"

#include <algorithm>
#include <cctype>

namespace channel {
namespace {

bool known(std::span<const ToolSpec> tools, const std::string& name) {
  if (name.empty()) return false;
  if (tools.empty()) return true;
  return std::any_of(tools.begin(), tools.end(), [&](const ToolSpec& t) { return t.name == name; });
}

// {"name": ..., "arguments"|"parameters": {...}} as a call.
bool json_call(std::string_view text, std::span<const ToolSpec> tools, ToolCall& call) {
  OrderedJson j = OrderedJson::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
  call.name = j["name"].get<std::string>();
  if (!known(tools, call.name)) return false;
  call.arguments = OrderedJson::object();
  for (const char* key : {"arguments", "parameters"}) {
    if (!j.contains(key)) continue;
    OrderedJson a = j[key];
    if (a.is_string()) {  // arguments given as a JSON string, as the OpenAI API writes them
      a = OrderedJson::parse(a.get<std::string>(), nullptr, false);
    }
    if (!a.is_object()) return false;
    call.arguments = std::move(a);
  }
  return true;
}

void number_calls(ParsedReply& r) {
  for (size_t i = 0; i < r.tool_calls.size(); ++i) r.tool_calls[i].id = "call_" + std::to_string(i);
}

// Blocks between `open` and `close` markers whose insides parse as calls; the rest is text.
ParsedReply parse_blocks(std::string_view reply, std::string_view open, std::string_view close,
                         std::span<const ToolSpec> tools, bool python) {
  ParsedReply r;
  std::string text;
  size_t pos = 0;
  while (pos < reply.size()) {
    const size_t b = reply.find(open, pos);
    if (b == reply.npos) break;
    const size_t inner = b + open.size();
    const size_t e = reply.find(close, inner);
    if (e == reply.npos) break;
    const std::string_view body = trim_whitespace(reply.substr(inner, e - inner));
    ToolCall call;
    const bool ok = json_call(body, tools, call) ||
                    (python && parse_python_call(body, call) && known(tools, call.name));
    if (ok) {
      text += reply.substr(pos, b - pos);
      r.tool_calls.push_back(std::move(call));
    } else {
      text += reply.substr(pos, e + close.size() - pos);
    }
    pos = e + close.size();
  }
  text += reply.substr(std::min(pos, reply.size()));
  r.content = std::string(trim_whitespace(text));
  number_calls(r);
  return r;
}

// Mistral: text, then [TOOL_CALLS] and a JSON list of {"name", "arguments"} objects (an
// "id" in them is the model's own and is replaced). A list that does not parse stays text.
ParsedReply parse_mistral(std::string_view reply, std::span<const ToolSpec> tools) {
  ParsedReply r;
  constexpr std::string_view kTag = "[TOOL_CALLS]";
  const size_t at = reply.find(kTag);
  if (at == reply.npos) {
    r.content = std::string(trim_whitespace(reply));
    return r;
  }
  std::string_view body = trim_whitespace(reply.substr(at + kTag.size()));
  constexpr std::string_view kEos = "</s>";
  if (body.size() >= kEos.size() && body.substr(body.size() - kEos.size()) == kEos)
    body = trim_whitespace(body.substr(0, body.size() - kEos.size()));
  const OrderedJson list = OrderedJson::parse(body.begin(), body.end(), nullptr, false);
  std::vector<ToolCall> calls;
  bool ok = list.is_array() && !list.empty();
  for (size_t i = 0; ok && i < list.size(); ++i) {
    ToolCall c;
    ok = list[i].is_object() && json_call(list[i].dump(), tools, c);
    if (ok) calls.push_back(std::move(c));
  }
  if (!ok) {
    r.content = std::string(trim_whitespace(reply));
    return r;
  }
  r.content = std::string(trim_whitespace(reply.substr(0, at)));
  r.tool_calls = std::move(calls);
  number_calls(r);
  return r;
}

ParsedReply parse_llama3(std::string_view reply, std::span<const ToolSpec> tools) {
  ParsedReply r;
  std::string_view body = trim_whitespace(reply);
  constexpr std::string_view kTag = "<|python_tag|>";
  if (body.substr(0, kTag.size()) == kTag) body = trim_whitespace(body.substr(kTag.size()));
  ToolCall call;
  if (!body.empty() && body.front() == '{' && json_call(body, tools, call)) {
    r.tool_calls.push_back(std::move(call));
  } else {
    r.content = std::string(trim_whitespace(reply));
  }
  number_calls(r);
  return r;
}

ParsedReply parse_channel(std::string_view reply, std::span<const ToolSpec> tools) {
  ParsedReply r;
  std::string text;
  size_t pos = 0;
  while (pos <= reply.size()) {
    size_t e = reply.find('\n', pos);
    if (e == reply.npos) e = reply.size();
    std::string_view line = trim_whitespace(reply.substr(pos, e - pos));
    bool is_call = false;
    if (line.substr(0, 7) == "Answer:") line = trim_whitespace(line.substr(7));
    if (line.substr(0, 5) == "Call:") {
      std::string_view rest = trim_whitespace(line.substr(5));
      const size_t brace = rest.find('{');
      if (brace != rest.npos) {
        OrderedJson args = OrderedJson::parse(rest.substr(brace), nullptr, false);
        const std::string name(trim_whitespace(rest.substr(0, brace)));
        if (args.is_object() && known(tools, name)) {
          r.tool_calls.push_back({"", name, std::move(args)});
          is_call = true;
        }
      }
    }
    if (!is_call) {
      text += reply.substr(pos, e - pos);
      if (e < reply.size()) text += '\n';
    }
    pos = e + 1;
  }
  r.content = std::string(trim_whitespace(text));
  number_calls(r);
  return r;
}

// --- Python literal arguments -------------------------------------------------------------

struct PyParser {
  std::string_view s;
  size_t i = 0;
  int depth = 0;

  void ws() {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  }
  bool eat(char c) {
    ws();
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }
  bool ident(std::string& out) {
    ws();
    const size_t b = i;
    while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_' ||
                            (i > b && (s[i] == '.' || s[i] == '-')))) {
      ++i;
    }
    if (i == b || std::isdigit(static_cast<unsigned char>(s[b]))) return false;
    out = std::string(s.substr(b, i - b));
    return true;
  }
  bool string(OrderedJson& out) {
    const char q = s[i++];
    std::string v;
    while (i < s.size() && s[i] != q) {
      char c = s[i++];
      if (c == '\\' && i < s.size()) {
        const char n = s[i++];
        switch (n) {
          case 'n': c = '\n'; break;
          case 't': c = '\t'; break;
          case 'r': c = '\r'; break;
          case '0': c = '\0'; break;
          default: c = n;  // \\ \' \" and anything else as itself
        }
      }
      v += c;
    }
    if (i >= s.size()) return false;
    ++i;
    out = std::move(v);
    return true;
  }
  bool value(OrderedJson& out) {
    if (++depth > 32) return false;
    struct Leave {
      int& d;
      ~Leave() { --d; }
    } leave{depth};
    ws();
    if (i >= s.size()) return false;
    const char c = s[i];
    if (c == '"' || c == '\'') return string(out);
    if (c == '[' || c == '(') {
      const char close = c == '[' ? ']' : ')';
      ++i;
      out = OrderedJson::array();
      if (eat(close)) return true;
      do {
        OrderedJson v;
        if (!value(v)) return false;
        out.push_back(std::move(v));
      } while (eat(','));
      return eat(close);
    }
    if (c == '{') {
      ++i;
      out = OrderedJson::object();
      if (eat('}')) return true;
      do {
        ws();
        OrderedJson k;
        if (i >= s.size() || (s[i] != '"' && s[i] != '\'') || !string(k)) return false;
        if (!eat(':')) return false;
        OrderedJson v;
        if (!value(v)) return false;
        out[k.get<std::string>()] = std::move(v);
      } while (eat(','));
      return eat('}');
    }
    std::string word;
    const size_t b = i;
    while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '.' ||
                            s[i] == '-' || s[i] == '+' || s[i] == '_')) {
      ++i;
    }
    word = std::string(s.substr(b, i - b));
    if (word == "True" || word == "true") { out = true; return true; }
    if (word == "False" || word == "false") { out = false; return true; }
    if (word == "None" || word == "null") { out = nullptr; return true; }
    if (word.empty()) return false;
    OrderedJson n = OrderedJson::parse(word, nullptr, false);
    if (!n.is_number()) return false;
    out = std::move(n);
    return true;
  }
};

}  // namespace

bool parse_python_call(std::string_view text, ToolCall& call) {
  PyParser p{trim_whitespace(text)};
  std::string name;
  if (!p.ident(name) || !p.eat('(')) return false;
  OrderedJson args = OrderedJson::object();
  if (!p.eat(')')) {
    do {
      std::string key;
      if (!p.ident(key) || !p.eat('=')) return false;
      OrderedJson v;
      if (!p.value(v)) return false;
      args[key] = std::move(v);
    } while (p.eat(','));
    if (!p.eat(')')) return false;
  }
  p.ws();
  if (p.i != p.s.size()) return false;
  call.name = std::move(name);
  call.arguments = std::move(args);
  return true;
}

ParsedReply parse_tool_calls(ChatFamily family, std::string_view reply,
                             std::span<const ToolSpec> tools) {
  switch (family) {
    case ChatFamily::llama3: return parse_llama3(reply, tools);
    case ChatFamily::chatml: return parse_blocks(reply, "<tool_call>", "</tool_call>", tools, false);
    case ChatFamily::gemma3: return parse_blocks(reply, "```tool_code", "```", tools, true);
    case ChatFamily::channel: return parse_channel(reply, tools);
    case ChatFamily::inst:
      return parse_mistral(reply, tools);
  }
  return {std::string(reply), {}, {}};
}

}  // namespace channel
