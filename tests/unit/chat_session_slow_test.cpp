// ChatSession on Channel's own model: the system prompt and tools become the anchors, turns
// become spans of their type, the ring evicts old turns and the chat goes on, replies stop
// at the template's stop string or a token limit or an interrupt, and a saved conversation
// resumes exactly.
#include <atomic>
#include <filesystem>

#include <gtest/gtest.h>

#include "chat/chat_session.h"
#include "model/model.h"
#include "util/error.h"

namespace channel {
namespace {

const std::string kModel = std::string(CHANNEL_SOURCE_DIR) + "/models/channel-default.gguf";

std::shared_ptr<const Model> model() {
  static std::shared_ptr<const Model> m = Model::load(kModel);
  return m;
}

ChatConfig config(uint32_t slots = 4096) {
  ChatConfig c;
  c.ring.ring.n_slots = slots;
  c.ring.ring.n_recall = 0;
  c.ring.n_threads = 1;
  c.sampling.temperature = 0.0f;
  const Tokenizer& tok = model()->tokenizer();
  c.chat_template = chat_template_by_name("channel", tok.token_to_piece(tok.bos_id()));
  c.system = parse_system_prompt(
      "---\ntools:\n  - name: lookup\n    description: Look a word up.\n    parameters:\n"
      "      type: object\n      properties: {word: {type: string}}\n---\n"
      "A dictionary answers questions about words.",
      "test");
  return c;
}

TEST(ChatSession, SystemPromptAndToolsAreTheAnchors) {
  ChatSession s(model(), config());
  ChatOutput anchors;
  make_chat_formatter(s.config().chat_template)->open(s.config().system.text, s.config().system.tools, anchors);
  const std::vector<int32_t> ids = model()->tokenizer().encode(anchors.text(), false, true);
  const ChatStats st = s.stats();
  EXPECT_EQ(st.anchors, ids.size());
  EXPECT_EQ(ids.front(), model()->tokenizer().bos_id());
  EXPECT_EQ(st.window_live, 0u);
  EXPECT_GT(st.anchor_spans, 0u);
}

TEST(ChatSession, RepliesAndTypesTurns) {
  ChatSession s(model(), config());
  s.add_user("What is a dog?");
  ReplyOptions o;
  o.max_tokens = 40;
  std::string streamed;
  o.on_text = [&](std::string_view t) {
    streamed += t;
    return true;
  };
  const ChatReply r = s.reply(o);
  EXPECT_GT(r.n_tokens, 0);
  EXPECT_EQ(streamed, r.text);
  EXPECT_EQ(r.text.find('\n', r.text.find_first_not_of(" \n")), std::string::npos);  // one line
  // The window holds a user span, response spans and the turn's end.
  const SlotRing& ring = s.stream().ring_session().ring();
  bool user = false, response = false;
  for (size_t i = 0; i < ring.window_span_count(); ++i) {
    user |= ring.window_span(i).span_type == SpanType::user;
    response |= ring.window_span(i).span_type == SpanType::response_sentence;
  }
  EXPECT_TRUE(user);
  EXPECT_TRUE(response);
}

TEST(ChatSession, GoesOnPastTheRingAndEvictsWholeTurns) {
  ChatSession s(model(), config(/*slots=*/640));
  const uint32_t anchors = s.stats().anchors;
  ReplyOptions o;
  o.max_tokens = 12;
  for (int turn = 0; turn < 30; ++turn) {
    s.add_user("Question number " + std::to_string(turn) + ": what does the word ring mean?");
    s.reply(o);
  }
  const ChatStats st = s.stats();
  EXPECT_GT(st.clock, 640u);
  EXPECT_GT(st.evicted_spans, 0u);
  EXPECT_EQ(st.anchors, anchors);  // the system prompt never leaves
  EXPECT_LE(st.window_live, st.window_capacity);
}

TEST(ChatSession, InterruptEndsTheReplyNotTheChat) {
  ChatSession s(model(), config());
  s.add_user("Tell me about words.");
  std::atomic<bool> stop{true};
  ReplyOptions o;
  o.max_tokens = 50;
  o.interrupt = &stop;
  const ChatReply r = s.reply(o);
  EXPECT_EQ(r.finish, FinishReason::interrupted);
  EXPECT_EQ(r.n_tokens, 1);
  stop = false;
  s.add_user("Again?");
  o.max_tokens = 5;
  EXPECT_GT(s.reply(o).n_tokens, 0);
}

TEST(ChatSession, SavedConversationResumesExactly) {
  const std::string path = (std::filesystem::temp_directory_path() / "chat_session_test.session").string();
  ReplyOptions o;
  o.max_tokens = 10;
  ChatSession a(model(), config());
  a.add_user("What is a cat?");
  a.reply(o);
  a.save(path);
  auto b = ChatSession::load(model(), config(), path);
  EXPECT_EQ(b->stats().clock, a.stats().clock);
  a.add_user("And a bird?");
  b->add_user("And a bird?");
  EXPECT_EQ(a.reply(o).text, b->reply(o).text);
  std::filesystem::remove(path);
}

// A forced call (OpenAI tool_choice naming a function) is written under the JSON constraint
// and stored as a tool_call span; its result goes back as a tool_result span.
TEST(ChatSession, ToolCallsAndResultsAreTheirOwnSpans) {
  ChatSession s(model(), config());
  s.add_user("What does lamp mean?");
  ReplyOptions o;
  o.max_tokens = 30;
  o.prefix = s.formatter().tool_call_opener("lookup");
  o.json_object = true;
  o.suffix = *s.formatter().tool_call_closer();
  const ChatReply r = s.reply(o);
  ASSERT_EQ(r.parsed.tool_calls.size(), 1u) << r.text;
  EXPECT_EQ(r.parsed.tool_calls[0].name, "lookup");
  EXPECT_EQ(r.finish, FinishReason::tool_calls);
  s.add_tool_result("lookup", "A lamp is a device that gives light.");
  const SlotRing& ring = s.stream().ring_session().ring();
  bool call = false, result = false;
  for (size_t i = 0; i < ring.window_span_count(); ++i) {
    call |= ring.window_span(i).span_type == SpanType::tool_call;
    result |= ring.window_span(i).span_type == SpanType::tool_result;
  }
  EXPECT_TRUE(call);
  EXPECT_TRUE(result);
}

TEST(ChatSession, StopStringsEndTheReply) {
  ChatSession s(model(), config());
  s.add_user("What is a dog?");
  ReplyOptions o;
  o.max_tokens = 30;
  o.stop = {"a", "e"};
  const ChatReply r = s.reply(o);
  EXPECT_EQ(r.text.find('a'), std::string::npos);
  EXPECT_EQ(r.text.find('e'), std::string::npos);
}

// A reply that opens with a <think> block (as thinking models write one) has it split off as
// reasoning; calls and content are read from what follows, and the stream sees the block.
TEST(ChatSession, ALeadingThinkBlockIsTheReasoning) {
  ChatSession s(model(), config());
  s.add_user("What does lamp mean?");
  ReplyOptions o;
  o.max_tokens = 30;
  // (on one line: Channel's template ends a reply at its line end)
  o.prefix = "<think> The user asks a word; look it up. </think> " +
             s.formatter().tool_call_opener("lookup");
  o.json_object = true;
  o.suffix = *s.formatter().tool_call_closer();
  std::string streamed;
  o.on_text = [&](std::string_view t) {
    streamed += t;
    return true;
  };
  const ChatReply r = s.reply(o);
  EXPECT_EQ(r.parsed.reasoning, "The user asks a word; look it up.");
  ASSERT_EQ(r.parsed.tool_calls.size(), 1u) << r.text;
  EXPECT_EQ(r.parsed.tool_calls[0].name, "lookup");
  EXPECT_EQ(streamed.rfind("<think>", 0), 0u);
}

}  // namespace
}  // namespace channel
