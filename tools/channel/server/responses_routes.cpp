// /v1/responses (OpenAI's Responses API) over the chat machinery: the request is read as a
// chat completion (responses_request.h) and replied to on a fresh ring; the reply becomes
// output items (an assistant message of output_text, function_call items). With "stream":
// true the typed events go out as SSE (response.created ... response.completed, no [DONE]).
// Responses are kept (store, the default) for previous_response_id and GET/DELETE
// /v1/responses/{id}, the newest --max-stored-responses of them, in memory.
#include <algorithm>
#include <cmath>
#include <memory>

#include "chat/chat_formatter.h"
#include "model/model.h"
#include "server/api_error.h"
#include "server/event_stream.h"
#include "server/prepared_chat.h"
#include "server/reply_stream.h"
#include "server/response_store.h"
#include "server/responses_request.h"
#include "server/server_context.h"
#include "tokenizer/tokenizer.h"

namespace channel::server {
namespace {

using nlohmann::json;

json usage(uint64_t input, uint64_t output) {
  return {{"input_tokens", input},
          {"input_tokens_details", {{"cached_tokens", 0}}},
          {"output_tokens", output},
          {"output_tokens_details", {{"reasoning_tokens", 0}}},
          {"total_tokens", input + output}};
}

// A float setting as the request wrote it (0.95, not 0.949999988).
double setting(float x) {
  return std::round(static_cast<double>(x) * 1e6) / 1e6;
}

json output_text(const std::string& text) {
  return {{"type", "output_text"}, {"text", text}, {"annotations", json::array()}};
}

json message_item(const std::string& id, const std::string& status, json content) {
  return {{"id", id},
          {"type", "message"},
          {"role", "assistant"},
          {"status", status},
          {"content", std::move(content)}};
}

json reasoning_item(const std::string& id, const std::string& text) {
  return {{"id", id},
          {"type", "reasoning"},
          {"summary", json::array()},
          {"content", json::array({{{"type", "reasoning_text"}, {"text", text}}})}};
}

json call_item(const std::string& id, const std::string& call_id, const std::string& name,
               const std::string& args) {
  return {{"id", id},     {"type", "function_call"}, {"status", "completed"}, {"call_id", call_id},
          {"name", name}, {"arguments", args}};
}

// One response being made: its request, ids and, once replied, its output.
struct Responding {
  ResponsesRequest req;
  std::unique_ptr<PreparedChat> chat;
  std::string id, message_id, reasoning_id;
  int64_t created = 0;

  json object(const std::string& status, const json& output, const json& use) const {
    json o = {{"id", id},
              {"object", "response"},
              {"created_at", created},
              {"status", status},
              {"error", nullptr},
              {"incomplete_details", nullptr},
              {"instructions", req.instructions.empty() ? json(nullptr) : json(req.instructions)},
              {"max_output_tokens", req.max_output_tokens},
              {"model", chat->meta.model},
              {"output", output},
              {"parallel_tool_calls", true},
              {"previous_response_id",
               req.previous_response_id.empty() ? json(nullptr) : json(req.previous_response_id)},
              {"reasoning", {{"effort", nullptr}, {"summary", nullptr}}},
              {"store", req.store},
              {"temperature", setting(req.chat.params.sampling.temperature)},
              {"text", req.text},
              {"tool_choice", req.tool_choice},
              {"tools", req.tools},
              {"top_p", setting(req.chat.params.sampling.top_p)},
              {"truncation", "disabled"},
              {"usage", use},
              {"user", nullptr},
              {"metadata", req.metadata}};
    if (status == "incomplete") o["incomplete_details"] = {{"reason", "max_output_tokens"}};
    return o;
  }
};

struct Finished {
  json output = json::array();
  json calls = json::array();  // the reply's calls in chat form (for the stored conversation)
  std::string status;
};

// `logprobs`: the reply's tokens' entries (chat form), or null when not asked for.
Finished finish(const Responding& r, const ChatReply& reply, const json& logprobs) {
  Finished f;
  const bool cut = reply.finish == FinishReason::length;
  f.status = cut ? "incomplete" : "completed";
  const std::string& text = reply.parsed.content;
  json part = output_text(text);
  if (!logprobs.is_null()) part["logprobs"] = logprobs["content"];
  if (!reply.parsed.reasoning.empty())  // a thinking model's <think> block comes first
    f.output.push_back(reasoning_item(r.reasoning_id, reply.parsed.reasoning));
  if (!text.empty() || reply.parsed.tool_calls.empty())
    f.output.push_back(message_item(r.message_id, f.status, json::array({part})));
  for (const ToolCall& c : reply.parsed.tool_calls) {
    const std::string call_id = new_item_id("call");
    const std::string args = c.arguments.dump();
    f.output.push_back(call_item(new_item_id("fc"), call_id, c.name, args));
    f.calls.push_back({{"id", call_id},
                       {"type", "function"},
                       {"function", {{"name", c.name}, {"arguments", args}}}});
  }
  return f;
}

void keep(ServerContext& ctx, const Responding& r, const json& object, const ChatReply& reply,
          const Finished& f) {
  if (!r.req.store) return;
  json conversation = r.req.conversation;
  json said = {
      {"role", "assistant"},
      {"content", reply.parsed.content.empty() && !f.calls.empty() ? json(nullptr)
                                                                   : json(reply.parsed.content)}};
  if (!f.calls.empty()) said["tool_calls"] = f.calls;
  conversation.push_back(said);
  ctx.responses.put({r.id, object, std::move(conversation)});
}

std::string event(json e, uint64_t& seq) {
  e["sequence_number"] = seq++;
  return "event: " + e["type"].get<std::string>() +
         "\ndata: " + e.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

void create_response(ServerContext& ctx, const httplib::Request& http_req, httplib::Response& res) {
  const json body = parse_body(http_req);
  json previous = json::array();
  if (const std::string prev = previous_response_id(body); !prev.empty()) {
    const auto stored = ctx.responses.get(prev);
    if (!stored)
      throw ApiError(404,
                     "no stored response '" + prev + "' (this server keeps the newest " +
                         std::to_string(ctx.config.max_stored_responses) + ")",
                     "previous_response_id", "response_not_found");
    previous = stored->conversation;
  }
  auto r = std::make_shared<Responding>();
  r->req = parse_responses_request(body, previous, ctx.config.chat.sampling,
                                   ctx.config.default_max_tokens);
  auto lease = std::make_shared<GenerationSlots::Lease>(ctx.slots);
  r->chat = prepare_chat(ctx, r->req.chat, "resp");
  r->id = new_item_id("resp");
  r->message_id = new_item_id("msg");
  r->reasoning_id = new_item_id("rs");
  r->created = r->chat->meta.created;
  auto lp = std::make_shared<StreamedLogprobs>(ctx.config.model->tokenizer(),
                                               r->req.chat.params.logprobs, true);
  r->chat->options.logprobs = lp->top();
  r->chat->options.logprobs_out = lp->entries();
  if (!r->req.chat.params.stream) {
    const ChatReply reply = r->chat->chat->reply(r->chat->options);
    ctx.metrics.completion_tokens += static_cast<uint64_t>(reply.n_tokens);
    const Finished f = finish(*r, reply, lp->whole(reply.text.size()));
    const json object =
        r->object(f.status, f.output, usage(r->chat->meta.prompt_tokens, reply.n_tokens));
    keep(ctx, *r, object, reply, f);
    send_json(res, object);
    return;
  }
  start_event_stream(ctx, res, [&ctx, r, lease, lp](EventSink& out) {
    uint64_t seq = 0;
    const auto send = [&](const std::string& s) { return out.send(s); };
    send(event({{"type", "response.created"},
                {"response", r->object("in_progress", json::array(), nullptr)}},
               seq));
    send(event({{"type", "response.in_progress"},
                {"response", r->object("in_progress", json::array(), nullptr)}},
               seq));
    json where = {{"item_id", r->message_id}, {"output_index", 0}, {"content_index", 0}};
    // A reasoning item goes out whole, at index 0, once the answer begins (or at the end).
    bool thought_sent = false;
    const auto send_thought = [&](const std::string& text) {
      const json item = reasoning_item(r->reasoning_id, text);
      send(event({{"type", "response.output_item.added"}, {"output_index", 0}, {"item", item}},
                 seq));
      send(
          event({{"type", "response.output_item.done"}, {"output_index", 0}, {"item", item}}, seq));
      thought_sent = true;
    };
    const auto opened = [&] {
      send(event({{"type", "response.output_item.added"},
                  {"output_index", where["output_index"]},
                  {"item", message_item(r->message_id, "in_progress", json::array())}},
                 seq));
      json e = where;
      e["type"] = "response.content_part.added";
      e["part"] = output_text("");
      send(event(e, seq));
    };
    // The text streams as it comes (ReplyStream: with tools offered, up to a call); the
    // reasoning goes out as its item once the answer begins.
    ReplyStream stream(r->chat->chat->tool_marker());
    bool started = false;
    std::string thought;
    const auto delta = [&](const std::string& t) {
      json d = where;
      d["type"] = "response.output_text.delta";
      d["delta"] = t;
      send(event(d, seq));
    };
    const auto pieces = [&](const std::vector<ReplyStream::Piece>& ps) {
      for (const ReplyStream::Piece& piece : ps) {
        if (piece.reasoning) {
          thought += piece.text;
          continue;
        }
        if (!started) {
          started = true;
          if (const std::string_view th = trim_whitespace(thought); !th.empty()) {
            send_thought(std::string(th));
            where["output_index"] = 1;
          }
          opened();
        }
        delta(piece.text);
      }
    };
    ReplyOptions o = r->chat->options;
    o.on_text = [&](std::string_view text) {
      if (!out.alive()) return false;
      pieces(stream.push(text));
      return out.alive();
    };
    const std::optional<ChatReply> streamed = generate_streamed(
        ctx, *lease, out, [&] { return r->chat->chat->reply(o); },
        [&](const std::string& message) {
          return event({{"type", "error"},
                        {"code", "server_error"},
                        {"message", message},
                        {"param", nullptr}},
                       seq);
        });
    if (!streamed) return;
    const ChatReply& reply = *streamed;
    pieces(stream.finish());
    if (!out.alive()) return;
    const Finished f = finish(*r, reply, lp->whole(reply.text.size()));
    for (size_t i = 0; i < f.output.size(); ++i) {
      const json& item = f.output[i];
      if (item["type"] == "reasoning") {
        if (!thought_sent) send_thought(reply.parsed.reasoning);
        continue;
      }
      if (item["type"] == "message") {
        where["output_index"] = i;
        const std::string text = item["content"][0]["text"];
        if (!started) {  // nothing streamed (no text, or a call came first): whole now
          opened();
          if (!text.empty()) delta(text);
        } else if (const std::string rest = stream.rest_of(text); !rest.empty()) {
          delta(rest);  // text after the calls
        }
        json done = where;
        done["type"] = "response.output_text.done";
        done["text"] = text;
        send(event(done, seq));
        json part = where;
        part["type"] = "response.content_part.done";
        part["part"] = output_text(text);
        send(event(part, seq));
      } else {
        json added = item;
        added["arguments"] = "";
        added["status"] = "in_progress";
        send(event({{"type", "response.output_item.added"}, {"output_index", i}, {"item", added}},
                   seq));
        const json at = {{"item_id", item["id"]}, {"output_index", i}};
        json d = at;
        d["type"] = "response.function_call_arguments.delta";
        d["delta"] = item["arguments"];
        send(event(d, seq));
        json done = at;
        done["type"] = "response.function_call_arguments.done";
        done["arguments"] = item["arguments"];
        send(event(done, seq));
      }
      send(
          event({{"type", "response.output_item.done"}, {"output_index", i}, {"item", item}}, seq));
    }
    const json object =
        r->object(f.status, f.output, usage(r->chat->meta.prompt_tokens, reply.n_tokens));
    keep(ctx, *r, object, reply, f);
    send(event({{"type", f.status == "completed" ? "response.completed" : "response.incomplete"},
                {"response", object}},
               seq));
  });
}

}  // namespace

void register_responses_routes(httplib::Server& http, ServerContext& ctx) {
  http.Post("/v1/responses", [&ctx](const httplib::Request& req, httplib::Response& res) {
    create_response(ctx, req, res);
  });
  const std::string one = R"(/v1/responses/([A-Za-z0-9_-]{1,128}))";
  http.Get(one, [&ctx](const httplib::Request& req, httplib::Response& res) {
    const auto stored = ctx.responses.get(req.matches[1]);
    if (!stored)
      throw ApiError(404, "no stored response '" + std::string(req.matches[1]) + "'", "",
                     "response_not_found");
    send_json(res, stored->response);
  });
  http.Delete(one, [&ctx](const httplib::Request& req, httplib::Response& res) {
    const std::string id = req.matches[1];
    if (!ctx.responses.remove(id))
      throw ApiError(404, "no stored response '" + id + "'", "", "response_not_found");
    send_json(res, {{"id", id}, {"object", "response"}, {"deleted", true}});
  });
}

}  // namespace channel::server
