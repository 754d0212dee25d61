// /v1/messages (Anthropic's Messages API) over the chat machinery: the request is read as a
// chat completion (anthropic_request.h) and replied to on a fresh ring; the reply becomes
// content blocks (text, tool_use). With "stream": true the typed events go out as SSE
// (message_start ... message_stop). /v1/messages/count_tokens counts a request's prompt.
// Errors on these paths are Anthropic's shape (http_server.cpp).
#include <algorithm>
#include <memory>

#include "chat/chat_formatter.h"
#include "model/model.h"
#include "server/anthropic_request.h"
#include "server/api_error.h"
#include "server/event_stream.h"
#include "server/prepared_chat.h"
#include "server/reply_stream.h"
#include "server/server_context.h"
#include "tokenizer/tokenizer.h"

namespace channel::server {
namespace {

using nlohmann::json;

std::string stop_reason(const ChatReply& reply) {
  if (!reply.parsed.tool_calls.empty()) return "tool_use";
  if (!reply.stop_string.empty()) return "stop_sequence";
  return reply.finish == FinishReason::length ? "max_tokens" : "end_turn";
}

json stop_sequence(const ChatReply& reply) {
  return reply.stop_string.empty() ? json(nullptr) : json(reply.stop_string);
}

json content_blocks(const ChatReply& reply) {
  json blocks = json::array();
  if (!reply.parsed.reasoning.empty())  // a thinking model's <think> block comes first
    blocks.push_back(
        {{"type", "thinking"}, {"thinking", reply.parsed.reasoning}, {"signature", ""}});
  if (!reply.parsed.content.empty())
    blocks.push_back({{"type", "text"}, {"text", reply.parsed.content}});
  for (const ToolCall& c : reply.parsed.tool_calls)
    blocks.push_back({{"type", "tool_use"},
                      {"id", new_item_id("toolu")},
                      {"name", c.name},
                      {"input", c.arguments}});
  return blocks;
}

json message(const std::string& id, const std::string& model, json content, const json& stop,
             const json& sequence, uint64_t in, uint64_t out) {
  return {{"id", id},
          {"type", "message"},
          {"role", "assistant"},
          {"model", model},
          {"content", std::move(content)},
          {"stop_reason", stop},
          {"stop_sequence", sequence},
          {"usage", {{"input_tokens", in}, {"output_tokens", out}}}};
}

std::string event(const json& e) {
  return "event: " + e["type"].get<std::string>() +
         "\ndata: " + e.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

void messages(ServerContext& ctx, const httplib::Request& http_req, httplib::Response& res) {
  const ChatRequest req = parse_anthropic_request(parse_body(http_req), ctx.config.chat.sampling,
                                                  ctx.config.default_max_tokens);
  auto lease = std::make_shared<GenerationSlots::Lease>(ctx.slots);
  std::shared_ptr<PreparedChat> p = prepare_chat(ctx, req, "msg");
  const std::string id = new_item_id("msg");
  const std::string model = ctx.config.model_id;
  if (!req.params.stream) {
    const ChatReply reply = p->chat->reply(p->options);
    ctx.metrics.completion_tokens += static_cast<uint64_t>(reply.n_tokens);
    send_json(res,
              message(id, model, content_blocks(reply), stop_reason(reply), stop_sequence(reply),
                      p->meta.prompt_tokens, static_cast<uint64_t>(reply.n_tokens)));
    return;
  }
  start_event_stream(ctx, res, [&ctx, p, lease, id, model](EventSink& out) {
    const auto send = [&](const std::string& s) { return out.send(s); };
    send(event({{"type", "message_start"},
                {"message",
                 message(id, model, json::array(), nullptr, nullptr, p->meta.prompt_tokens, 0)}}));
    send(event({{"type", "ping"}}));
    // The text streams as it comes (ReplyStream: with tools offered, up to a call); a thinking
    // model's <think> block goes out as a thinking block, whole, once the answer begins.
    int index = 0;
    bool open = false, thought_sent = false;
    std::string thought;
    const auto send_thought = [&](const std::string& text) {
      send(event({{"type", "content_block_start"},
                  {"index", index},
                  {"content_block", {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}}}));
      send(event({{"type", "content_block_delta"},
                  {"index", index},
                  {"delta", {{"type", "thinking_delta"}, {"thinking", text}}}}));
      send(event({{"type", "content_block_stop"}, {"index", index}}));
      ++index;
      thought_sent = true;
    };
    const auto text_delta = [&](const std::string& t) {
      send(event({{"type", "content_block_delta"},
                  {"index", index},
                  {"delta", {{"type", "text_delta"}, {"text", t}}}}));
    };
    ReplyStream stream(p->chat->tool_marker());
    const auto pieces = [&](const std::vector<ReplyStream::Piece>& ps) {
      for (const ReplyStream::Piece& piece : ps) {
        if (piece.reasoning) {
          thought += piece.text;
          continue;
        }
        if (!open) {
          open = true;
          if (const std::string_view th = trim_whitespace(thought); !th.empty())
            send_thought(std::string(th));
          send(event({{"type", "content_block_start"},
                      {"index", index},
                      {"content_block", {{"type", "text"}, {"text", ""}}}}));
        }
        text_delta(piece.text);
      }
    };
    ReplyOptions o = p->options;
    o.on_text = [&](std::string_view text) {
      if (!out.alive()) return false;
      pieces(stream.push(text));
      return out.alive();
    };
    const std::optional<ChatReply> streamed = generate_streamed(
        ctx, *lease, out, [&] { return p->chat->reply(o); },
        [](const std::string& message) {
          return event(
              {{"type", "error"}, {"error", {{"type", "api_error"}, {"message", message}}}});
        });
    if (!streamed) return;
    const ChatReply& reply = *streamed;
    pieces(stream.finish());
    if (!out.alive()) return;
    if (open) {
      if (const std::string rest = stream.rest_of(reply.parsed.content); !rest.empty())
        text_delta(rest);  // text after the calls
      send(event({{"type", "content_block_stop"}, {"index", index}}));
      ++index;
    }
    for (const json& b : content_blocks(reply)) {
      if (b["type"] == "thinking") {
        if (!thought_sent) send_thought(b["thinking"]);
        continue;
      }
      if (b["type"] == "text") {
        if (open) continue;  // streamed already
        send(event({{"type", "content_block_start"},
                    {"index", index},
                    {"content_block", {{"type", "text"}, {"text", ""}}}}));
        send(event({{"type", "content_block_delta"},
                    {"index", index},
                    {"delta", {{"type", "text_delta"}, {"text", b["text"]}}}}));
      } else {
        json start = b;
        start["input"] = json::object();
        send(event({{"type", "content_block_start"}, {"index", index}, {"content_block", start}}));
        send(event(
            {{"type", "content_block_delta"},
             {"index", index},
             {"delta", {{"type", "input_json_delta"}, {"partial_json", b["input"].dump()}}}}));
      }
      send(event({{"type", "content_block_stop"}, {"index", index}}));
      ++index;
    }
    send(event(
        {{"type", "message_delta"},
         {"delta", {{"stop_reason", stop_reason(reply)}, {"stop_sequence", stop_sequence(reply)}}},
         {"usage", {{"output_tokens", reply.n_tokens}}}}));
    send(event({{"type", "message_stop"}}));
  });
}

// The prompt's tokens as the template renders it (system, tools and messages).
void count_tokens(ServerContext& ctx, const httplib::Request& http_req, httplib::Response& res) {
  json body = parse_body(http_req);
  if (body.is_object() && !body.contains("max_tokens")) body["max_tokens"] = 1;  // not asked here
  const ChatRequest req =
      parse_anthropic_request(body, ctx.config.chat.sampling, ctx.config.default_max_tokens);
  std::vector<ToolSpec> tools;
  if (req.tool_choice != ToolChoice::none) tools = req.tools;
  // Without the generation prompt, as usage.input_tokens counts a conversation fed.
  const ChatOutput rendered =
      render_conversation(ctx.config.chat.chat_template, req.messages, tools, false);
  send_json(res, {{"input_tokens",
                   ctx.config.model->tokenizer().encode(rendered.text(), false, true).size()}});
}

}  // namespace

void register_anthropic_routes(httplib::Server& http, ServerContext& ctx) {
  http.Post("/v1/messages", [&ctx](const httplib::Request& req, httplib::Response& res) {
    messages(ctx, req, res);
  });
  http.Post(
      "/v1/messages/count_tokens",
      [&ctx](const httplib::Request& req, httplib::Response& res) { count_tokens(ctx, req, res); });
}

}  // namespace channel::server
