// The chat formatters against Jinja2 rendering the real template texts (tests/data/
// chat_templates, sources in SOURCES.md): python3 with python3-jinja2 makes the goldens at
// test time (tests/chat/render_chat_template.py), for conversations with a system prompt,
// several turns, tool calls and tool results; every byte must match, and where the template
// raises the formatter must refuse too.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "chat/chat_formatter.h"
#include "chat/formatters.h"
#include "chat/python_json.h"
#include "util/error.h"

namespace channel {
namespace {

const std::filesystem::path kTemplates =
    std::filesystem::path(CHANNEL_SOURCE_DIR) / "tests/data/chat_templates";

struct Case {
  std::string label;
  std::vector<ChatMessage> messages;
  std::vector<ToolSpec> tools;
  bool add_generation_prompt = true;
};

ChatMessage msg(ChatRole role, std::string content) {
  ChatMessage m;
  m.role = role;
  m.content = std::move(content);
  return m;
}

ChatMessage call(std::string content, std::vector<ToolCall> calls) {
  ChatMessage m = msg(ChatRole::assistant, std::move(content));
  m.tool_calls = std::move(calls);
  return m;
}

std::vector<ToolSpec> weather_tools() {
  ToolSpec w;
  w.name = "get_weather";
  w.description = "Current weather in a city.";
  w.parameters = OrderedJson::parse(
      R"({"type": "object", "properties": {"city": {"type": "string", "description": "City name"},
          "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]})");
  ToolSpec t;
  t.name = "search_notes";
  t.description = "Search the user's notes.\nReturns matching lines.";
  t.parameters = OrderedJson::parse(
      R"({"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}}})");
  return {w, t};
}

ToolCall tc(std::string name, const char* args) {
  return ToolCall{"call_1", std::move(name), OrderedJson::parse(args)};
}

std::vector<Case> plain_cases() {
  using R = ChatRole;
  return {
      {"one user turn", {msg(R::user, "Hello there")}, {}, true},
      {"system and user", {msg(R::system, "You are terse."), msg(R::user, "What is a ring?")}, {}, true},
      {"multi-turn",
       {msg(R::system, "  Answer in one line.\n"), msg(R::user, "Name a colour."),
        msg(R::assistant, "Blue."), msg(R::user, " And another?  "), msg(R::assistant, "Red."),
        msg(R::user, "Thanks")},
       {},
       true},
      {"ends on a reply, no prompt",
       {msg(R::user, "Say \"hi\" \\ twice"), msg(R::assistant, "hi hi")}, {}, false},
      {"unicode and newlines",
       {msg(R::system, "Système: réponds — brièvement.\n\nDeux lignes."),
        msg(R::user, "Qu'est-ce que 日本?\nEt \t tab."), msg(R::assistant, "Le Japon.\n")},
       {},
       true},
  };
}

std::vector<Case> tool_cases() {
  using R = ChatRole;
  ChatMessage result = msg(R::tool, "{\"temp\": 21, \"sky\": \"clear\"}");
  result.tool_call_id = "call_1";
  return {
      {"tools, call and result",
       {msg(R::system, "You help with the weather."), msg(R::user, "Weather in Paris?"),
        call("", {tc("get_weather", R"({"city": "Paris", "unit": "celsius"})")}), result},
       weather_tools(),
       true},
      {"tools without a system prompt",
       {msg(R::user, "Find my notes on rings"),
        call("", {tc("search_notes", R"({"query": "ring buffer", "limit": 3})")}),
        msg(R::tool, "ring buffer: fixed slots\nwraps around"),
        msg(R::assistant, "You wrote that a ring buffer has fixed slots."),
        msg(R::user, "ok")},
       weather_tools(),
       true},
      {"text before a call, odd values",
       {msg(R::system, "Tools are allowed."), msg(R::user, "Check it"),
        call("Let me look.",
             {tc("search_notes",
                 R"({"query": "π ≈ 3.14 \"q\"", "limit": 0, "ratio": 1.5, "tiny": 0.0001,
                     "big": 1e20, "flag": true, "none": null, "list": [1, "two", {"x": []}]})")}),
        msg(R::tool, "nothing")},
       weather_tools(),
       false},
      {"two calls, two results",
       {msg(R::user, "Weather in Oslo and Rome?"),
        call("", {tc("get_weather", R"({"city": "Oslo"})"), tc("get_weather", R"({"city": "Rome"})")}),
        msg(R::tool, "Oslo: 3 C"), msg(R::tool, "Rome: 18 C")},
       weather_tools(),
       true},
  };
}

OrderedJson to_hf_json(const ChatMessage& m) {
  OrderedJson j = OrderedJson::object();
  j["role"] = chat_role_name(m.role);
  j["content"] = m.content;
  if (!m.tool_calls.empty()) {
    OrderedJson calls = OrderedJson::array();
    for (const ToolCall& c : m.tool_calls) {
      OrderedJson fn = OrderedJson::object();
      fn["name"] = c.name;
      fn["arguments"] = c.arguments;
      calls.push_back(OrderedJson{{"id", c.id}, {"type", "function"}, {"function", fn}});
    }
    j["tool_calls"] = calls;
  }
  if (m.role == ChatRole::tool && !m.tool_call_id.empty()) j["tool_call_id"] = m.tool_call_id;
  return j;
}

struct Golden {
  std::string text;
  std::string error;
};

bool have_jinja2() {
  return std::system("python3 -c 'import jinja2' >/dev/null 2>&1") == 0;
}

// Renders every case with the template through Jinja2.
std::vector<Golden> jinja_goldens(const std::string& template_file, const std::string& bos,
                                  bool gemma_tools, const std::vector<Case>& cases,
                                  const std::string& eos = "") {
  OrderedJson spec = OrderedJson::object();
  spec["template"] = (kTemplates / template_file).string();
  spec["bos_token"] = bos;
  spec["eos_token"] = eos;
  spec["gemma_tools"] = gemma_tools;
  OrderedJson js = OrderedJson::array();
  for (const Case& c : cases) {
    OrderedJson cj = OrderedJson::object();
    OrderedJson ms = OrderedJson::array();
    for (const ChatMessage& m : c.messages) ms.push_back(to_hf_json(m));
    cj["messages"] = ms;
    if (!c.tools.empty()) {
      OrderedJson ts = OrderedJson::array();
      for (const ToolSpec& t : c.tools) ts.push_back(t.to_openai_json());
      cj["tools"] = ts;
    }
    cj["add_generation_prompt"] = c.add_generation_prompt;
    js.push_back(cj);
  }
  spec["cases"] = js;
  const auto dir = std::filesystem::temp_directory_path();
  const std::string in = (dir / ("chat_cases_" + std::to_string(::getpid()) + ".json")).string();
  const std::string out = in + ".out";
  std::ofstream(in) << spec.dump();
  const std::string cmd = "python3 " + (std::filesystem::path(CHANNEL_SOURCE_DIR) /
                                        "tests/chat/render_chat_template.py").string() +
                          " " + in + " > " + out;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::stringstream ss;
  ss << std::ifstream(out).rdbuf();
  std::filesystem::remove(in);
  std::filesystem::remove(out);
  std::vector<Golden> goldens;
  for (const auto& r : nlohmann::json::parse(ss.str())) {
    goldens.push_back({r.value("text", ""), r.value("error", "")});
  }
  return goldens;
}

void expect_matches(const std::string& template_file, const std::string& name,
                    const std::string& bos, const std::vector<Case>& cases,
                    const std::string& eos = "") {
  if (!have_jinja2()) GTEST_SKIP() << "python3-jinja2 is not installed (scripts/setup.sh installs it)";
  const ChatTemplateSpec spec = chat_template_by_name(name, bos);
  const std::vector<Golden> goldens =
      jinja_goldens(template_file, bos, spec.family == ChatFamily::gemma3, cases, eos);
  ASSERT_EQ(goldens.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(template_file + ": " + cases[i].label);
    const Case& c = cases[i];
    if (!goldens[i].error.empty()) {
      EXPECT_THROW(render_conversation(spec, c.messages, c.tools, c.add_generation_prompt), Error)
          << "Jinja2 raised: " << goldens[i].error;
      continue;
    }
    try {
      const ChatOutput out = render_conversation(spec, c.messages, c.tools, c.add_generation_prompt);
      EXPECT_EQ(out.text(), goldens[i].text);
    } catch (const Error& e) {
      ADD_FAILURE() << "the formatter refused what Jinja2 rendered: " << e.what();
    }
  }
}

std::vector<Case> all_cases() {
  std::vector<Case> c = plain_cases();
  for (Case& t : tool_cases()) c.push_back(std::move(t));
  return c;
}

TEST(ChatTemplate, Gemma3MatchesJinja) { expect_matches("gemma3.jinja", "gemma3", "<bos>", all_cases()); }
TEST(ChatTemplate, Llama31MatchesJinja) {
  expect_matches("llama3_1.jinja", "llama3.1", "<|begin_of_text|>", all_cases());
}
TEST(ChatTemplate, Llama3PlainMatchesJinja) {
  expect_matches("llama3.jinja", "llama3", "<|begin_of_text|>", plain_cases());
}
TEST(ChatTemplate, Qwen25MatchesJinja) { expect_matches("qwen2_5.jinja", "qwen2.5", "", all_cases()); }
TEST(ChatTemplate, ChannelMatchesJinja) { expect_matches("channel.jinja", "channel", "<bos>", all_cases()); }
TEST(ChatTemplate, Llama2MatchesJinja) {
  expect_matches("llama2.jinja", "llama2", "<s>", plain_cases(), "</s>");
  // The template has no tools: a conversation with them is refused, not rendered without.
  const Case c = tool_cases()[0];
  EXPECT_THROW(
      render_conversation(chat_template_by_name("llama2", "<s>"), c.messages, c.tools, true),
      Error);
}

// Mistral's template puts the tools before the last user message and the system prompt in
// it only while it is the conversation's last message (dropped once replied to); Channel's
// anchors hold both before the first (inst_formatter.cpp). The texts are equal without a
// system prompt where tools come with one user message, and with one when the conversation
// is that one user message. Call ids are the template's 9 alphanumerics.
std::vector<Case> mistral_cases() {
  using R = ChatRole;
  std::vector<Case> out;
  for (Case& c : plain_cases()) {
    const auto users = std::count_if(c.messages.begin(), c.messages.end(),
                                     [](const ChatMessage& m) { return m.role == R::user; });
    if (c.messages[0].role != R::system || (users == 1 && c.messages.back().role == R::user))
      out.push_back(std::move(c));
  }
  out.push_back(
      {"multi-turn, no system prompt",
       {msg(R::user, "Name a colour."), msg(R::assistant, " Blue. "), msg(R::user, "Another?")},
       {},
       true});
  for (Case& c : tool_cases()) {
    const auto users = std::count_if(c.messages.begin(), c.messages.end(),
                                     [](const ChatMessage& m) { return m.role == R::user; });
    if (users != 1 || c.messages[0].role == R::system) continue;
    int n = 0;
    std::vector<std::string> ids;
    for (ChatMessage& m : c.messages) {
      for (ToolCall& call : m.tool_calls) {
        call.id = "abcdefgh" + std::to_string(n++);
        ids.push_back(call.id);
      }
    }
    // Results answer the calls in order.
    size_t next = 0;
    for (ChatMessage& m : c.messages)
      if (m.role == R::tool) m.tool_call_id = ids[next++ % ids.size()];
    out.push_back(std::move(c));
  }
  return out;
}

TEST(ChatTemplate, MistralMatchesJinja) {
  expect_matches("mistral.jinja", "mistral", "<s>", mistral_cases(), "</s>");
}

TEST(ChatTemplate, MistralKeepsTheSystemPromptInTheAnchors) {
  const Case c = plain_cases()[2];  // a system prompt and three user turns
  const ChatOutput out =
      render_conversation(chat_template_by_name("mistral", "<s>"), c.messages, {}, true);
  ASSERT_EQ(out.segments()[0].type, SpanType::system);
  EXPECT_EQ(out.segments()[0].text, "<s>[INST]   Answer in one line.\n\n\n");
  const std::string text = out.text();
  EXPECT_EQ(text.find("Answer in one line"), text.rfind("Answer in one line"));  // once
  EXPECT_EQ(text.substr(text.size() - 13), "Thanks[/INST]");
  // Call ids that are not the template's 9 alphanumerics get a fixed one of their own.
  EXPECT_EQ(mistral_call_id("abc123XYZ"), "abc123XYZ");
  EXPECT_EQ(mistral_call_id("call_0").size(), 9u);
  EXPECT_EQ(mistral_call_id("call_0"), mistral_call_id("call_0"));
  EXPECT_NE(mistral_call_id("call_0"), mistral_call_id("call_1"));
}

std::string read_text(const std::string& file) {
  std::stringstream ss;
  ss << std::ifstream(kTemplates / file).rdbuf();
  return ss.str();
}

TEST(ChatTemplate, DetectsTheFamilyFromTheTemplateText) {
  EXPECT_EQ(detect_chat_template(read_text("gemma3.jinja"), "").name, "gemma3");
  EXPECT_EQ(detect_chat_template(read_text("llama3.jinja"), "").name, "llama3");
  EXPECT_EQ(detect_chat_template(read_text("llama3_1.jinja"), "").name, "llama3.1");
  EXPECT_EQ(detect_chat_template(read_text("qwen2_5.jinja"), "").name, "qwen2.5");
  EXPECT_EQ(detect_chat_template("{% for m in messages %}<|im_start|>{{ m.role }}{% endfor %}", "").name,
            "chatml");
  EXPECT_EQ(detect_chat_template(read_text("llama2.jinja"), "").name, "llama2");
  EXPECT_EQ(detect_chat_template(read_text("mistral.jinja"), "").name, "mistral");
  EXPECT_EQ(detect_chat_template("", "").name, "channel");
  EXPECT_EQ(detect_chat_template(read_text("channel.jinja"), "").name, "channel");
  EXPECT_THROW(chat_template_by_name("jinja", ""), Error);
}

// Turns become spans of their own type, so the ring evicts on turn boundaries.
TEST(ChatTemplate, TurnsBecomeSpansOfTheirType) {
  for (const char* name : {"gemma3", "llama3.1", "qwen2.5", "channel"}) {
    SCOPED_TRACE(name);
    const Case c = tool_cases()[0];
    const ChatOutput out = render_conversation(chat_template_by_name(name, "<bos>"), c.messages,
                                               c.tools, true);
    std::vector<SpanType> types;
    for (const ChatSegment& s : out.segments()) types.push_back(s.type);
    EXPECT_EQ(types.front(), SpanType::system);
    EXPECT_EQ(types.back(), SpanType::response_sentence);  // the generation prompt
    for (SpanType t : {SpanType::user, SpanType::tool_call, SpanType::tool_result})
      EXPECT_NE(std::find(types.begin(), types.end(), t), types.end()) << span_type_name(t);
    for (const ChatSegment& s : out.segments()) {
      if (s.type == SpanType::tool_call) {
        EXPECT_NE(s.text.find("get_weather"), std::string::npos);
      }
      if (s.type == SpanType::tool_result) {
        EXPECT_NE(s.text.find("clear"), std::string::npos);
      }
      if (s.type == SpanType::user) {
        EXPECT_NE(s.text.find("Paris"), std::string::npos);
      }
    }
  }
}

// Turn by turn equals all at once: a never-ending chat appends without re-rendering.
TEST(ChatTemplate, IncrementalRenderingEqualsWholeConversation) {
  for (const char* name :
       {"gemma3", "llama3.1", "llama3", "qwen2.5", "chatml", "channel", "llama2", "mistral"}) {
    SCOPED_TRACE(name);
    const ChatTemplateSpec spec = chat_template_by_name(name, "<s>");
    const Case c = plain_cases()[2];
    const bool inst = spec.family == ChatFamily::inst;
    auto f = make_chat_formatter(spec);
    ChatOutput out;
    f->open(c.messages[0].content, {}, out);
    for (size_t i = 1; i < c.messages.size(); ++i) {
      if (c.messages[i].role == ChatRole::assistant) {
        f->generation_prompt(out);
        // [INST] models write their reply's leading space (and Llama 2 a trailing one).
        out.add(SpanType::response_sentence,
                (inst ? " " : "") + c.messages[i].content + (spec.name == "llama2" ? " " : ""));
        // what the model generates: the end-of-turn token's text, then the template's rest
        const std::string eot = spec.family == ChatFamily::gemma3   ? "<end_of_turn>"
                                : spec.family == ChatFamily::llama3 ? "<|eot_id|>"
                                : spec.family == ChatFamily::chatml ? "<|im_end|>"
                                : inst                              ? "</s>"
                                                                    : "\n";
        out.add(SpanType::turn_end, eot + f->end_generated_reply());
      } else {
        f->add(c.messages[i], out);
      }
    }
    f->generation_prompt(out);
    std::string whole = render_conversation(spec, c.messages, {}, true).text();
    if (spec.family == ChatFamily::channel) {
      // Channel's replies are generated after "Answer:" with their own leading space.
      EXPECT_EQ(out.text().size() + 2, whole.size());
    } else {
      EXPECT_EQ(out.text(), whole);
    }
  }
}

TEST(PythonJson, MatchesPythonDumps) {
  EXPECT_EQ(python_json_dumps(OrderedJson::parse(R"({"b": 1, "a": [1.5, 1e20, 0.0001, 1e-05, 100.0]})")),
            R"({"b": 1, "a": [1.5, 1e+20, 0.0001, 1e-05, 100.0]})");
  EXPECT_EQ(python_json_dumps(OrderedJson::parse(R"({"k": {"x": []}, "e": {}})"), 2),
            "{\n  \"k\": {\n    \"x\": []\n  },\n  \"e\": {}\n}");
  EXPECT_EQ(python_json_dumps(OrderedJson("a\"\\\n\x01é")), "\"a\\\"\\\\\\n\\u0001é\"");
  EXPECT_EQ(python_json_dumps(OrderedJson(-0.5)), "-0.5");
  EXPECT_EQ(python_json_dumps(OrderedJson(123456789012345678.0)), "1.2345678901234568e+17");
}

}  // namespace
}  // namespace channel
