// The C API's episodic memory (include/channel.h): attaching a store, recall by text, flush,
// automatic recall and its events, turns with recall, and replay.
#include <string_view>
#include <vector>

#include "capi/capi_internal.h"
#include "memory/text_cue.h"
#include "runtime/generate_stream.h"
#include "tokenizer/tokenizer.h"

using namespace channel;
using namespace channel::capi;

extern "C" {

channel_status channel_session_attach_memory(channel_session* session, const char* path,
                                             uint32_t max_episodes) {
  return guarded(CHANNEL_ERR_FORMAT, [&] {
    require_session(session);
    require(path, "path");
    if (session->memory) fail(CHANNEL_ERR_STATE, "a memory store is already attached");
    if (max_episodes == 0) fail(CHANNEL_ERR_ARGUMENT, "max_episodes must be at least 1");
    auto store = std::make_unique<EpisodicStore>(
        open_or_create_store(path, *session->model, max_episodes, 64));
    const Tokenizer& tok = session->model->tokenizer();
    MemoryConfig mc;
    mc.summarize = [&tok](std::span<const int32_t> t) { return tok.decode(t); };
    // The top-k scan and large rehydrations use as many threads as the session computes with.
    mc.query_threads = session->stream->ring_session().n_threads();
    session->memory =
        std::make_unique<MemoryAttachment>(session->stream->ring_session(), *store, mc);
    // Recall copy (channel_session_set_recall_copy): the sampler reads what tier 3 holds. The
    // attachment is destroyed before the stream and its sampler (capi_internal.h).
    session->stream->sampler().set_logit_bias(
        [m = session->memory.get()](size_t n, std::vector<LogitEdit>& e) {
          m->recalled_bonus(n, e);
        });
    session->store = std::move(store);
  });
}

channel_status channel_session_recall_text(channel_session* session, const char* text,
                                           size_t text_len, size_t k, size_t* n_recalled) {
  return guarded(CHANNEL_ERR_STATE, [&] {
    require_session(session);
    require(text, "text");
    if (!session->memory) fail(CHANNEL_ERR_STATE, "no memory store is attached");
    size_t n = 0;
    if (k > 0 && session->store->live_count() > 0) {
      const std::vector<float> cue = text_cue(*session->model, std::string_view(text, text_len),
                                              session->stream->ring_session().n_threads());
      n = session->memory->recall_top(cue, k).size();
    }
    if (n_recalled) *n_recalled = n;
  });
}

channel_status channel_session_memory_flush(channel_session* session, int include_window) {
  return guarded(CHANNEL_ERR_IO, [&] {
    require_session(session);
    if (!session->memory) fail(CHANNEL_ERR_STATE, "no memory store is attached");
    if (include_window) {
      session->memory->consolidate_window();
    } else {
      session->memory->flush();
    }
    const WorkerStats st = session->memory->stats().worker;
    if (st.failed > 0)
      fail(CHANNEL_ERR_IO, "{}: {} episodes could not be written: {}", session->store->path(),
           st.failed, st.last_error);
  });
}

channel_status channel_session_set_recall_copy(channel_session* session, float bias) {
  return guarded(CHANNEL_ERR_ARGUMENT, [&] {
    require_session(session);
    if (!session->memory) fail(CHANNEL_ERR_STATE, "no memory store is attached");
    if (!(bias >= 0.0f) || bias > 20.0f)
      fail(CHANNEL_ERR_ARGUMENT, "recall copy bias {} out of range (0..20)", bias);
    RecallCopyConfig c = session->memory->copy();
    c.bias = bias;
    session->memory->set_copy(c);
  });
}

channel_auto_recall_params channel_auto_recall_default_params(void) {
  channel_auto_recall_params p{};
  p.method = CHANNEL_RECALL_AUTO;
  p.k = 2;
  p.neighbours = 0;
  p.velocity_factor = 0.0f;
  p.cooldown_tokens = 256;
  p.lexical = kDefaultLexicalWeight;
  p.min_score_ratio = kDefaultMinScoreRatio;
  return p;
}

channel_status channel_session_set_auto_recall(channel_session* session,
                                               const channel_auto_recall_params* params) {
  return guarded(CHANNEL_ERR_ARGUMENT, [&] {
    require_session(session);
    if (!session->memory) fail(CHANNEL_ERR_STATE, "no memory store is attached");
    session->auto_recall.reset();
    if (!params) return;
    static constexpr RecallMethod kMethods[] = {RecallMethod::automatic, RecallMethod::centroid,
                                                RecallMethod::keys, RecallMethod::proj,
                                                RecallMethod::hybrid};
    if (static_cast<uint32_t>(params->method) > 4)
      fail(CHANNEL_ERR_ARGUMENT, "recall method {} out of range", static_cast<int>(params->method));
    AutoRecallConfig c;
    c.method = kMethods[params->method];
    c.k = params->k;
    c.neighbours = params->neighbours;
    c.velocity_factor = params->velocity_factor;
    c.cooldown_tokens = params->cooldown_tokens;
    if (!(params->lexical >= 0.0f) || params->lexical > 1000.0f)
      fail(CHANNEL_ERR_ARGUMENT, "lexical weight {} out of range (0..1000)", params->lexical);
    c.lexical = params->lexical;
    if (!(params->min_score_ratio >= 0.0f) || params->min_score_ratio > 1.0f)
      fail(CHANNEL_ERR_ARGUMENT, "min_score_ratio {} out of range (0..1)", params->min_score_ratio);
    c.min_score_ratio = params->min_score_ratio;
    auto ar = std::make_unique<AutoRecall>(*session->memory, c);
    if (params->callback) {
      const channel_recall_callback cb = params->callback;
      void* user = params->user_data;
      ar->set_listener([cb, user](const RecallEvent& e) {
        std::vector<uint64_t> ids;
        std::vector<float> scores;
        for (const RecallHit& h : e.hits) {
          ids.push_back(h.episode_id);
          scores.push_back(h.score);
        }
        channel_recall_event ce{};
        ce.reason = recall_reason_name(e.reason);
        ce.method = recall_method_name(e.method);
        ce.clock = e.clock;
        ce.n_hits = ids.size();
        ce.hit_ids = ids.data();
        ce.hit_scores = scores.data();
        ce.n_recalled = e.recalled.size();
        ce.recalled = e.recalled.data();
        ce.n_kept = e.kept.size();
        ce.kept = e.kept.data();
        ce.n_released = e.released.size();
        ce.released = e.released.data();
        ce.n_neighbours = e.neighbours.size();
        ce.neighbours = e.neighbours.data();
        ce.n_below_gate = e.below_gate.size();
        ce.below_gate = e.below_gate.data();
        ce.n_skipped = e.skipped.size();
        ce.skipped = e.skipped.data();
        ce.query_ms = e.query_ms;
        ce.recall_ms = e.recall_ms;
        cb(&ce, user);
      });
    }
    session->auto_recall = std::move(ar);
  });
}

channel_status channel_session_recall_turn(channel_session* session, int background) {
  return guarded(CHANNEL_ERR_STATE, [&] {
    require_session(session);
    if (!session->auto_recall) fail(CHANNEL_ERR_STATE, "automatic recall is not on");
    if (background) {
      session->auto_recall->recall_async(RecallReason::turn);
    } else {
      (void)session->auto_recall->recall_now(RecallReason::turn);
    }
  });
}

channel_status channel_session_feed_turn(channel_session* session, const int32_t* tokens,
                                         size_t n_tokens) {
  return guarded(CHANNEL_ERR_STATE, [&] {
    require_session(session);
    const auto span = token_span(session, tokens, n_tokens);
    if (!session->auto_recall) {
      session->stream->feed(SpanType::user, span);
      return;
    }
    (void)feed_turn_with_recall(*session->stream, *session->auto_recall, span, SpanType::user);
  });
}

channel_status channel_session_recall_poll(channel_session* session) {
  return guarded(CHANNEL_ERR_STATE, [&] {
    require_session(session);
    if (session->auto_recall) (void)session->auto_recall->poll();
  });
}

channel_status channel_session_replay(channel_session* session, uint64_t episode_id,
                                      size_t* n_tokens) {
  return guarded(CHANNEL_ERR_FORMAT, [&] {
    require_session(session);
    if (!session->memory) fail(CHANNEL_ERR_STATE, "no memory store is attached");
    if (!session->store->find(episode_id))
      fail(CHANNEL_ERR_ARGUMENT, "{}: no episode {} to replay", session->store->path(),
           episode_id);
    const Episode e = session->store->read(episode_id);  // checksum first: nothing fed if bad
    session->stream->feed(SpanType::user, e.tokens);
    if (n_tokens) *n_tokens = e.tokens.size();
  });
}

}  // extern "C"
