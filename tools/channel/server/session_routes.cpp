// Channel's own endpoints: named sessions that live on the server (their ring, anchors and
// memory), continued by POST /v1/sessions/{name}/messages; their state (tiers, spans,
// evictions, recall slots); save and restore (in --data-dir); memory query and episode
// listing; and the autonomic probe (a thought run on the ring and rolled back bit for bit).
#include <algorithm>
#include <cmath>
#include <filesystem>

#include "memory/episodic_store.h"
#include "memory/text_cue.h"
#include "model/model.h"
#include "server/api_error.h"
#include "server/chat_streamer.h"
#include "server/event_stream.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/server_context.h"
#include "util/error.h"

namespace channel::server {
namespace {

using nlohmann::json;

constexpr const char* kName = R"(/v1/sessions/([A-Za-z0-9_-]{1,64}))";

json transcript_entry(const std::string& role, const std::string& content) {
  return {{"role", role}, {"content", content}};
}

// POST /v1/sessions/{name}/messages: user messages and tool results, then the reply.
void session_messages(ServerContext& ctx, const httplib::Request& http_req, httplib::Response& res) {
  std::shared_ptr<NamedSession> s = ctx.sessions.get(http_req.matches[1]);
  const json body = parse_body(http_req);
  if (!body.is_object()) bad_request("the body must be a JSON object");
  if (!body.contains("messages")) bad_request("messages is required", "messages");
  const std::vector<ChatMessage> messages = parse_messages(body["messages"]);
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].role != ChatRole::user && messages[i].role != ChatRole::tool)
      bad_request("a session takes user messages and tool results; its system prompt is fixed at creation",
                  "messages[" + std::to_string(i) + "].role");
  }
  json params = body;
  params["messages"] = json::array({{{"role", "user"}, {"content", ""}}});
  const ChatRequest req = parse_chat_request(params, ctx.config.chat.sampling, ctx.config.default_max_tokens);
  check_logit_bias(req.params, ctx.config.model->hparams().n_vocab);
  auto lease = std::make_shared<GenerationSlots::Lease>(ctx.slots);
  auto lock = std::make_shared<std::unique_lock<std::mutex>>(lock_session(*s));
  ChatSession& chat = *s->chat;
  const uint64_t clock0 = chat.stats().clock;
  try {
    for (const ChatMessage& m : messages) {
      if (m.role == ChatRole::user) {
        chat.add_user(m.content);
      } else {
        chat.add_tool_result(m.name, m.content);
      }
      s->transcript.push_back(transcript_entry(chat_role_name(m.role), m.content));
      ctx.events.publish("turn", {{"session", s->name}, {"role", chat_role_name(m.role)}, {"content", m.content}});
    }
  } catch (const Error& e) {
    bad_request(e.what(), "messages");
  }
  ctx.events.publish("state", s->state());
  ReplyOptions o;
  o.max_tokens = req.params.max_tokens;
  o.stop = req.params.stop;
  o.sampling = req.params.sampling;
  o.json_object = req.params.json_object;
  o.json_schema = req.params.json_schema;
  auto lp =
      std::make_shared<StreamedLogprobs>(ctx.config.model->tokenizer(), req.params.logprobs, true);
  o.logprobs = lp->top();
  o.logprobs_out = lp->entries();
  ResponseMeta meta = new_meta("chatcmpl", ctx.config.model_id);
  meta.prompt_tokens = chat.stats().clock - clock0;
  ctx.metrics.prompt_tokens += meta.prompt_tokens;
  const std::string name = s->name;
  // Generation, with token events for the web view and a state event every 16 tokens.
  const auto generate = [&ctx, s, name](ReplyOptions opts, const std::function<bool(std::string_view)>& sink) {
    int n = 0;
    opts.on_text = [&](std::string_view t) {
      ctx.events.publish("token", {{"session", name}, {"text", std::string(t)}});
      if (++n % 16 == 0) ctx.events.publish("state", s->state());
      return sink ? sink(t) : true;
    };
    ChatReply reply = s->chat->reply(opts);
    json entry = transcript_entry("assistant", reply.parsed.content);
    if (!reply.parsed.tool_calls.empty()) entry["tool_calls"] = tool_calls_json(reply.parsed.tool_calls);
    s->transcript.push_back(entry);
    json turn = {{"session", name}, {"role", "assistant"}, {"content", reply.parsed.content},
                 {"finish_reason", finish_reason_name(reply.finish)}};
    if (entry.contains("tool_calls")) turn["tool_calls"] = entry["tool_calls"];
    ctx.events.publish("turn", turn);
    ctx.events.publish("state", s->state());
    return reply;
  };
  if (!req.params.stream) {
    const ChatReply reply = generate(o, nullptr);
    ctx.metrics.completion_tokens += static_cast<uint64_t>(reply.n_tokens);
    json j = chat_completion(meta, reply, lp->whole(reply.text.size()));
    j["session"] = s->state();
    send_json(res, j);
    return;
  }
  start_event_stream(ctx, res, [&ctx, s, lock, lease, o, meta, generate, lp](EventSink& out) {
    out.send(sse(chat_chunk(meta, {{"role", "assistant"}, {"content", ""}}, nullptr)));
    ChatStreamer streamer(meta, *lp, s->chat->tool_marker());
    const std::optional<ChatReply> reply = generate_streamed(
        ctx, *lease, out,
        [&] {
          return generate(o, [&](std::string_view t) {
            lp->emitted(t.size());
            if (!out.alive()) return false;
            const std::string chunks = streamer.push(t);
            return chunks.empty() || out.send(chunks);
          });
        },
        sse_error);
    lock->unlock();
    if (!reply || !out.alive()) return;
    out.send(streamer.end(*reply) + kSseDone);
  });
}

json memory_listing(ServerContext& ctx, NamedSession& s, const httplib::Request& req) {
  ChatSession& chat = *s.chat;
  const EpisodicStore* store = chat.store();
  if (!store) bad_request("session '" + s.name + "' has no memory (create it with \"memory\": true)");
  if (chat.memory()) chat.memory()->flush();
  json j = {{"session", s.name}, {"path", chat.config().memory_path}, {"episodes", json::array()}};
  for (const EpisodeHeader& h : store->list()) {
    j["episodes"].push_back({{"id", h.episode_id}, {"tokens", h.token_count}, {"start_clock", h.start_clock},
                             {"recalled", h.access_count}, {"summary", store->read(h.episode_id).summary}});
  }
  if (req.has_param("query")) {
    size_t k = 4;
    if (req.has_param("k")) {
      try {
        k = static_cast<size_t>(std::stoul(req.get_param_value("k")));
      } catch (const std::exception&) {
        bad_request("k must be a positive integer", "k");
      }
      if (k == 0 || k > 1024) bad_request("k must be from 1 to 1024", "k");
    }
    const std::vector<float> cue = text_cue(*ctx.config.model, req.get_param_value("query"), 1);
    j["hits"] = json::array();
    for (const RecallHit& h : chat.memory()->query(cue, k))
      j["hits"].push_back({{"id", h.episode_id}, {"score", h.score}, {"summary", store->read(h.episode_id).summary}});
  }
  return j;
}

// The autonomic probe: `text` runs on the ring as transient thought tokens and is rolled
// back; the answer is what the model would say next, and the ring is exactly as before.
json probe(ServerContext& ctx, NamedSession& s, const json& body) {
  if (!body.is_object() || !body.contains("text") || !body["text"].is_string()) bad_request("text is required", "text");
  int top_k = 5;
  if (body.contains("top_k")) {
    if (!body["top_k"].is_number_integer() || body["top_k"].get<int>() < 1 || body["top_k"].get<int>() > 100)
      bad_request("top_k must be an integer from 1 to 100", "top_k");
    top_k = body["top_k"].get<int>();
  }
  RingSession& ring = s.chat->stream().ring_session();
  const Tokenizer& tok = ctx.config.model->tokenizer();
  const std::vector<int32_t> ids = tok.encode(body["text"].get<std::string>(), false, true);
  if (ids.empty()) bad_request("text has no tokens", "text");
  if (ids.size() > ring.max_probe())
    bad_request("the probe is " + std::to_string(ids.size()) + " tokens; the ring can probe " +
                    std::to_string(ring.max_probe()) + " now", "text");
  const uint64_t before = ring.ring().state_checksum();
  std::vector<float> logits;
  try {
    logits = ring.probe(ids, SpanType::thought);
  } catch (const Error& e) {
    bad_request(e.what(), "text");
  }
  const size_t n_vocab = static_cast<size_t>(tok.n_vocab());
  std::span<const float> last(logits.data() + logits.size() - n_vocab, n_vocab);
  const float mx = *std::max_element(last.begin(), last.end());
  double z = 0;
  for (float v : last) z += std::exp(static_cast<double>(v - mx));
  std::vector<int32_t> order(n_vocab);
  for (size_t i = 0; i < n_vocab; ++i) order[i] = static_cast<int32_t>(i);
  std::partial_sort(order.begin(), order.begin() + top_k, order.end(),
                    [&](int32_t a, int32_t b) { return last[static_cast<size_t>(a)] > last[static_cast<size_t>(b)]; });
  json next = json::array();
  for (int i = 0; i < top_k; ++i) {
    const int32_t t = order[static_cast<size_t>(i)];
    next.push_back({{"token", t}, {"text", tok.token_to_piece(t)},
                    {"p", std::exp(static_cast<double>(last[static_cast<size_t>(t)] - mx)) / z}});
  }
  return {{"session", s.name}, {"probe_tokens", ids.size()}, {"next", next},
          {"rolled_back", ring.ring().state_checksum() == before}};
}

}  // namespace

void register_session_routes(httplib::Server& http, ServerContext& ctx) {
  const std::string name = kName;
  http.Post("/v1/sessions", [&ctx](const httplib::Request& req, httplib::Response& res) {
    std::shared_ptr<NamedSession> s = ctx.sessions.create(parse_body(req));
    std::lock_guard<std::mutex> lock(s->mu);
    send_json(res, s->state(), 201);
  });
  http.Get("/v1/sessions", [&ctx](const httplib::Request&, httplib::Response& res) {
    json list = json::array();
    for (const std::string& n : ctx.sessions.names()) {
      std::shared_ptr<NamedSession> s = ctx.sessions.get(n);
      std::unique_lock<std::mutex> lock(s->mu, std::try_to_lock);
      json e = {{"name", n}, {"busy", !lock.owns_lock()}};
      if (lock.owns_lock()) {
        const ChatStats st = s->chat->stats();
        e["clock"] = st.clock;
        e["turns"] = st.turns;
      }
      list.push_back(e);
    }
    send_json(res, {{"object", "list"}, {"data", list}});
  });
  http.Get(name, [&ctx](const httplib::Request& req, httplib::Response& res) {
    std::shared_ptr<NamedSession> s = ctx.sessions.get(req.matches[1]);
    auto lock = lock_session(*s);
    json j = s->state();
    j["transcript"] = s->transcript;
    send_json(res, j);
  });
  http.Delete(name, [&ctx](const httplib::Request& req, httplib::Response& res) {
    ctx.sessions.remove(req.matches[1]);
    send_json(res, {{"name", req.matches[1]}, {"deleted", true}});
  });
  http.Post(name + "/messages", [&ctx](const httplib::Request& req, httplib::Response& res) {
    session_messages(ctx, req, res);
  });
  http.Post(name + "/save", [&ctx](const httplib::Request& req, httplib::Response& res) {
    std::shared_ptr<NamedSession> s = ctx.sessions.get(req.matches[1]);
    const std::string path = ctx.sessions.session_path(s->name);
    auto lock = lock_session(*s);
    s->chat->save(path);
    send_json(res, {{"name", s->name}, {"saved", path}, {"clock", s->chat->stats().clock}});
  });
  http.Post(name + "/restore", [&ctx](const httplib::Request& req, httplib::Response& res) {
    std::shared_ptr<NamedSession> s = ctx.sessions.get(req.matches[1]);
    const std::string path = ctx.sessions.session_path(s->name);
    if (!std::filesystem::exists(path)) throw ApiError(404, "session '" + s->name + "' was never saved", "", "save_not_found");
    auto lock = lock_session(*s);
    ChatConfig config = s->chat->config();
    s->chat.reset();  // its memory flushes and unlocks before the restored one opens it
    try {
      s->chat = ChatSession::load(ctx.config.model, config, path);
    } catch (const Error& e) {
      s->chat = std::make_unique<ChatSession>(ctx.config.model, config);
      bad_request(std::string("restore failed, the session restarted empty: ") + e.what());
    }
    s->spans.clear();
    const json state = s->state();
    ctx.events.publish("state", state);
    send_json(res, state);
  });
  http.Get(name + "/memory", [&ctx](const httplib::Request& req, httplib::Response& res) {
    std::shared_ptr<NamedSession> s = ctx.sessions.get(req.matches[1]);
    auto lock = lock_session(*s);
    send_json(res, memory_listing(ctx, *s, req));
  });
  http.Post(name + "/probe", [&ctx](const httplib::Request& req, httplib::Response& res) {
    std::shared_ptr<NamedSession> s = ctx.sessions.get(req.matches[1]);
    const json body = parse_body(req);
    auto lock = lock_session(*s);
    send_json(res, probe(ctx, *s, body));
  });
}

}  // namespace channel::server
