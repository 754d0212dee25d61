// /v1/chat/completions and /v1/completions: each request is a conversation of its own on a
// fresh ring (the 4096-slot geometry): its system message and tools are the anchors, the
// other messages are fed turn by turn, and the reply is generated; with "stream": true it
// goes out as SSE chunks ending in "data: [DONE]". Weights are shared by all requests.
#include <memory>

#include "chat/json_prefix.h"
#include "model/model.h"
#include "runtime/prompt_scoring.h"
#include "runtime/session_base.h"
#include "server/api_error.h"
#include "server/chat_streamer.h"
#include "server/event_stream.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/prepared_chat.h"
#include "server/server_context.h"
#include "util/error.h"

namespace channel::server {
namespace {

using nlohmann::json;

void chat_completions(ServerContext& ctx, const httplib::Request& http_req, httplib::Response& res) {
  const ChatRequest req = parse_chat_request(parse_body(http_req), ctx.config.chat.sampling, ctx.config.default_max_tokens);
  auto lease = std::make_shared<GenerationSlots::Lease>(ctx.slots);
  std::shared_ptr<PreparedChat> p = prepare_chat(ctx, req);
  const Tokenizer& tok = ctx.config.model->tokenizer();
  auto lp = std::make_shared<StreamedLogprobs>(tok, req.params.logprobs, true);
  p->options.logprobs = lp->top();
  p->options.logprobs_out = lp->entries();
  if (!req.params.stream) {
    const ChatReply reply = p->chat->reply(p->options);
    ctx.metrics.completion_tokens += static_cast<uint64_t>(reply.n_tokens);
    send_json(res, chat_completion(p->meta, reply, lp->whole(reply.text.size())));
    return;
  }
  const bool include_usage = req.params.include_usage;
  start_event_stream(ctx, res, [&ctx, p, lease, include_usage, lp](EventSink& out) {
    out.send(sse(chat_chunk(p->meta, {{"role", "assistant"}, {"content", ""}}, nullptr)));
    ReplyOptions o = p->options;
    ChatStreamer streamer(p->meta, *lp, p->chat->tool_marker());
    o.on_text = [&](std::string_view text) {
      lp->emitted(text.size());
      if (!out.alive()) return false;
      const std::string chunks = streamer.push(text);
      return chunks.empty() || out.send(chunks);
    };
    const std::optional<ChatReply> reply = generate_streamed(
        ctx, *lease, out, [&] { return p->chat->reply(o); }, sse_error);
    if (!reply || !out.alive()) return;
    std::string end = streamer.end(*reply);
    if (include_usage) {
      json u = chat_chunk(p->meta, json::object(), nullptr);
      u["choices"] = json::array();
      u["usage"] = usage_json(p->meta.prompt_tokens, static_cast<uint64_t>(reply->n_tokens));
      end += sse(u);
    }
    out.send(end + kSseDone);
  });
}

// /v1/completions: the prompt (text, BOS first when the model wants one, or token ids as
// given) is fed to a fresh ring, no chat template. With echo and logprobs the prompt's own
// tokens are scored too (runtime/prompt_scoring.h); max_tokens 0 generates nothing.
void completions(ServerContext& ctx, const httplib::Request& http_req, httplib::Response& res) {
  const CompletionRequest req =
      parse_completion_request(parse_body(http_req), ctx.config.chat.sampling, ctx.config.default_max_tokens);
  check_model(ctx, req.params);
  const Tokenizer& tok = ctx.config.model->tokenizer();
  std::vector<int32_t> ids;
  std::string prompt;       // what echo returns
  size_t first_echoed = 0;  // a BOS this server added is run, not echoed
  if (req.prompt_is_ids) {
    ids = req.prompt_ids;
    const int32_t n_vocab = ctx.config.model->hparams().n_vocab;
    for (const int32_t t : ids)
      if (t >= n_vocab)
        bad_request("token " + std::to_string(t) + " is outside the vocabulary (" +
                        std::to_string(n_vocab) + " tokens)",
                    "prompt");
    prompt = tok.decode(ids);
  } else {
    ids = tok.encode(req.prompt, tok.add_bos_default(), true);
    prompt = req.prompt;
    if (tok.add_bos_default() && !ids.empty() && ids[0] == tok.bos_id()) first_echoed = 1;
  }
  if (ids.size() <= first_echoed) bad_request("the prompt is empty", "prompt");
  check_prompt_length(ctx, ids.size());
  auto lease = std::make_shared<GenerationSlots::Lease>(ctx.slots);
  json prompt_logprobs = nullptr;
  if (req.echo && req.params.logprobs >= 0) {
    const auto top = static_cast<size_t>(req.params.logprobs);
    std::unique_ptr<SessionBase> device;  // the serving device's context, where there is one
    if (ctx.config.device_context && ids.size() > 1)
      device = ctx.config.device_context(static_cast<int>(ids.size() - 1));
    prompt_logprobs = prompt_completion_logprobs(
        tok, ids,
        device ? score_prompt(*device, ids, top)
               : score_prompt(ctx.config.model, ids, top, ctx.config.chat.ring.n_threads),
        first_echoed);
  }
  const bool generate = req.params.max_tokens > 0;  // 0: the prompt alone, no ring
  std::shared_ptr<StreamSession> stream;
  if (generate) {
    stream = std::make_shared<StreamSession>(ctx.config.model, ctx.config.chat.ring,
                                             req.params.sampling);
    stream->seal();
    stream->feed(SpanType::user, ids);
  }
  ctx.metrics.prompt_tokens += ids.size();
  ResponseMeta meta = new_meta("cmpl", ctx.config.model_id);
  meta.prompt_tokens = ids.size();
  ReplyOptions o;
  o.max_tokens = req.params.max_tokens;
  o.stop = req.params.stop;
  o.json_object = req.params.json_object;
  o.json_schema = req.params.json_schema;
  // Offsets count from the start of the returned text (after the prompt when it is echoed).
  auto lp = std::make_shared<StreamedLogprobs>(tok, req.params.logprobs, false,
                                               req.echo ? prompt.size() : 0);
  o.logprobs = lp->top();
  o.logprobs_out = lp->entries();
  const auto body = [meta](const std::string& text, const json& finish, bool with_usage, uint64_t n,
                           const json& logprobs) {
    json j = {
        {"id", meta.id},
        {"object", "text_completion"},
        {"created", meta.created},
        {"model", meta.model},
        {"choices",
         json::array(
             {{{"index", 0}, {"text", text}, {"logprobs", logprobs}, {"finish_reason", finish}}})}};
    if (with_usage) j["usage"] = usage_json(meta.prompt_tokens, n);
    return j;
  };
  const auto run = [stream, generate](const ReplyOptions& options) {
    return generate ? run_generation(*stream, options, {}) : GenerationResult{};
  };
  if (!req.params.stream) {
    const GenerationResult g = run(o);
    ctx.metrics.completion_tokens += static_cast<uint64_t>(g.n_tokens);
    json logprobs = lp->whole(g.text.size());
    if (!prompt_logprobs.is_null())
      logprobs = joined_completion_logprobs(prompt_logprobs, logprobs);
    send_json(res, body((req.echo ? prompt : "") + g.text, openai_finish(g.finish), true,
                        g.n_tokens, logprobs));
    return;
  }
  const bool echo = req.echo;
  const bool include_usage = req.params.include_usage;
  start_event_stream(
      ctx, res,
      [&ctx, run, lease, o, body, echo, prompt, prompt_logprobs, lp,
       include_usage](EventSink& out) mutable {
        if (echo) out.send(sse(body(prompt, nullptr, false, 0, prompt_logprobs)));
        o.on_text = [&](std::string_view text) {
          lp->emitted(text.size());
          return out.send(sse(body(std::string(text), nullptr, false, 0, lp->next())));
        };
        const std::optional<GenerationResult> g = generate_streamed(
            ctx, *lease, out, [&] { return run(o); }, sse_error);
        if (!g || !out.alive()) return;
        std::string end =
            sse(body("", openai_finish(g->finish), false, 0, lp->rest(g->text.size())));
        if (include_usage) {  // stream_options.include_usage: a last chunk of no choices
          json u = body("", nullptr, true, static_cast<uint64_t>(g->n_tokens), nullptr);
          u["choices"] = json::array();
          end += sse(u);
        }
        out.send(end + kSseDone);
      });
}

}  // namespace

void register_chat_routes(httplib::Server& http, ServerContext& ctx) {
  http.Post("/v1/chat/completions", [&ctx](const httplib::Request& req, httplib::Response& res) {
    chat_completions(ctx, req, res);
  });
  http.Post("/v1/completions", [&ctx](const httplib::Request& req, httplib::Response& res) {
    completions(ctx, req, res);
  });
}

}  // namespace channel::server
