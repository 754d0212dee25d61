// The C API (include/channel.h) over StreamSession: models, sessions, sampling and files
// (the memory calls: channel_capi_memory.cpp); argument checks, and every exception
// turned into a status code plus a thread-local message at the boundary.
#include "channel.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "backend/device.h"
#include "capi/capi_internal.h"
#include "gguf/gguf_writer.h"
#include "gguf/model_signature.h"
#include "memory/text_embedding.h"
#include "model/model.h"
#include "model/random_model.h"
#include "model/token_check.h"
#include "runtime/context_device.h"
#include "runtime/generate_stream.h"
#include "runtime/ring_device.h"
#include "runtime/session_file.h"
#include "runtime/stream_session.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace channel::capi {

namespace {

thread_local std::string g_last_error;

}  // namespace

void require_session(const channel_session* s) {
  require(s, "session");
}

void require_readable(const char* path) {
  if (::access(path, R_OK) != 0)
    fail(CHANNEL_ERR_IO, "{}: cannot open: {}", path, std::strerror(errno));
}

std::span<const int32_t> token_span(const channel_session* s, const int32_t* tokens, size_t n) {
  if (n == 0) fail(CHANNEL_ERR_ARGUMENT, "no tokens given");
  require(tokens, "tokens");
  const std::span<const int32_t> span(tokens, n);
  try {
    check_token_ids(span, s->model->hparams().n_vocab);
  } catch (const Error& e) {
    fail(CHANNEL_ERR_ARGUMENT, "{}", e.what());
  }
  return span;
}

SpanType span_type(channel_span_type t) {
  const auto v = static_cast<int>(t);
  if (v < 0 || v >= kSpanTypeCount) fail(CHANNEL_ERR_ARGUMENT, "span type {} out of range", v);
  return static_cast<SpanType>(v);
}

namespace {

// The sampler `p` describes, for a model of n_vocab tokens.
SamplerConfig sampler_config(const channel_sampler_params* p, int32_t n_vocab) {
  SamplerConfig c;
  if (p == nullptr) return c;
  c.temperature = p->temperature;
  c.top_k = p->top_k;
  c.top_p = p->top_p;
  c.min_p = p->min_p;
  c.repeat_penalty = p->repeat_penalty;
  c.repeat_last_n = p->repeat_last_n;
  c.seed = p->seed;
  c.presence_penalty = p->presence_penalty;
  c.frequency_penalty = p->frequency_penalty;
  if (p->n_logit_bias > 0 && p->logit_bias == nullptr)
    fail(CHANNEL_ERR_ARGUMENT, "logit_bias is NULL with n_logit_bias = {}", p->n_logit_bias);
  for (size_t i = 0; i < p->n_logit_bias; ++i) {
    const channel_logit_bias& b = p->logit_bias[i];
    if (b.token < 0 || b.token >= n_vocab)
      fail(CHANNEL_ERR_ARGUMENT, "logit_bias[{}]: token {} is outside the vocabulary of {}", i,
           b.token, n_vocab);
    c.logit_bias.push_back({b.token, b.bias});
  }
  try {
    validate(c);
  } catch (const Error& e) {
    fail(CHANNEL_ERR_ARGUMENT, "{}", e.what());
  }
  return c;
}

int32_t n_vocab(const channel_session* s) {
  return s->model->hparams().n_vocab;
}

RingSessionConfig session_config(const channel_session_params* p) {
  const channel_session_params d = channel_session_default_params();
  if (p == nullptr) p = &d;
  if (p->n_threads < 0) fail(CHANNEL_ERR_ARGUMENT, "n_threads must be >= 0, got {}", p->n_threads);
  if (p->n_batch < 1) fail(CHANNEL_ERR_ARGUMENT, "n_batch must be >= 1, got {}", p->n_batch);
  RingSessionConfig c;
  c.ring.n_slots = p->n_slots;
  c.ring.n_recall = p->n_recall;
  c.ring.probe_reserve = p->probe_reserve;
  c.n_threads = p->n_threads;
  c.n_batch = p->n_batch;
  if (p->device != nullptr && p->device[0] != '\0') {
    RingComputeFactory device;
    try {
      device = ring_compute_for(parse_device(p->device));
    } catch (const Error& e) {
      fail(CHANNEL_ERR_ARGUMENT, "{}", e.what());
    }
    if (device) {  // no driver or device, a model the device cannot run: unavailable
      c.compute = [device](std::shared_ptr<const Model> model, const RingComputeShape& shape) {
        try {
          return device(std::move(model), shape);
        } catch (const Error& e) {
          fail(CHANNEL_ERR_UNAVAILABLE, "{}", e.what());
        }
      };
    }
  }
  return c;
}

channel_status wrap_model(std::shared_ptr<const Model> model, channel_model** out) {
  *out = new channel_model{std::move(model)};
  return CHANNEL_OK;
}

// The load's progress callback, or none.
LoadProgress load_progress(const channel_model_load_params* params) {
  if (!params || !params->progress) return {};
  return [fn = params->progress, user = params->progress_user_data](float f) { fn(f, user); };
}

}  // namespace

void set_last_error(std::string message) {
  g_last_error = std::move(message);
}

}  // namespace channel::capi

using namespace channel;
using namespace channel::capi;

extern "C" {

const char* channel_last_error(void) {
  return g_last_error.c_str();
}

const char* channel_status_name(channel_status status) {
  switch (status) {
    case CHANNEL_OK:
      return "ok";
    case CHANNEL_ERR_ARGUMENT:
      return "argument";
    case CHANNEL_ERR_STATE:
      return "state";
    case CHANNEL_ERR_IO:
      return "io";
    case CHANNEL_ERR_FORMAT:
      return "format";
    case CHANNEL_ERR_BUFFER:
      return "buffer";
    case CHANNEL_ERR_UNAVAILABLE:
      return "unavailable";
    case CHANNEL_ERR_NO_MEMORY:
      return "no memory";
    case CHANNEL_ERR_INTERNAL:
      return "internal";
  }
  return "unknown";
}

// ---- models ------------------------------------------------------------------------------

channel_status channel_model_load(const char* path, channel_model** out) {
  return channel_model_load_ex(path, nullptr, out);
}

channel_status channel_model_load_ex(const char* path, const channel_model_load_params* params,
                                     channel_model** out) {
  return guarded(CHANNEL_ERR_FORMAT, [&] {
    require(path, "path");
    require(out, "out");
    require_readable(path);
    wrap_model(Model::load(path, load_progress(params)), out);
  });
}

channel_status channel_model_load_memory(const void* data, size_t size, const char* name,
                                         channel_model** out) {
  return channel_model_load_memory_ex(data, size, name, nullptr, out);
}

channel_status channel_model_load_memory_ex(const void* data, size_t size, const char* name,
                                            const channel_model_load_params* params,
                                            channel_model** out) {
  return guarded(CHANNEL_ERR_FORMAT, [&] {
    require(data, "data");
    require(out, "out");
    const std::span<const unsigned char> bytes(static_cast<const unsigned char*>(data), size);
    wrap_model(Model::load_from_memory(bytes, name ? name : "(memory)", load_progress(params)),
               out);
  });
}

channel_status channel_model_create_random(const channel_random_model_params* params,
                                           channel_model** out) {
  return guarded(CHANNEL_ERR_ARGUMENT, [&] {
    require(params, "params");
    require(out, "out");
    RandomModelSpec s;
    const std::string arch = params->arch ? params->arch : "llama";
    if (arch == "llama") {
      s.arch = Arch::llama;
    } else if (arch == "gemma3") {
      s.arch = Arch::gemma3;
    } else {
      fail(CHANNEL_ERR_ARGUMENT, "arch '{}' is not llama or gemma3", arch);
    }
    const auto or_default = [](int32_t v, int d) { return v != 0 ? v : d; };
    s.hidden = or_default(params->n_embd, 32);
    s.layers = or_default(params->n_layer, 3);
    s.heads = or_default(params->n_head, 4);
    s.kv_heads = or_default(params->n_head_kv, 2);
    s.head_dim = or_default(params->head_dim, 8);
    s.ffn = or_default(params->n_ff, 64);
    s.vocab = or_default(params->n_vocab, 300);
    s.window = or_default(params->sliding_window, 8);
    s.window_pattern = 3;
    s.seed = params->seed;
    validate(s);
    // The model views the GGUF bytes, so they live in the same allocation as the model.
    struct Holder {
      std::vector<uint8_t> bytes;
      std::shared_ptr<const Model> model;
    };
    auto holder = std::make_shared<Holder>();
    {
      ThreadPool pool(1);
      GgufWriter w;
      write_random_model(s, w, pool);
      holder->bytes = w.to_bytes();
    }
    holder->model = Model::load_from_memory(holder->bytes, "(random model)");
    wrap_model(std::shared_ptr<const Model>(holder, holder->model.get()), out);
  });
}

void channel_model_free(channel_model* model) {
  delete model;
}

channel_status channel_model_get_info(const channel_model* model, channel_model_info* out) {
  return guarded(CHANNEL_ERR_INTERNAL, [&] {
    require(model, "model");
    require(out, "out");
    const ModelHparams& hp = model->model->hparams();
    channel_model_info info{};
    std::snprintf(info.arch, sizeof(info.arch), "%s", hp.arch.c_str());
    info.n_layer = hp.n_layer;
    info.n_embd = hp.n_embd;
    info.n_head = hp.n_head;
    info.n_head_kv = hp.n_head_kv;
    info.head_dim = hp.head_dim;
    info.n_vocab = hp.n_vocab;
    info.n_ctx_train = hp.n_ctx_train;
    info.sliding_window = hp.sliding_window;
    info.weight_bytes = model->model->weight_bytes();
    info.model_id = model_id_hash(model->model->gguf());
    *out = info;
  });
}

// ---- tokens ------------------------------------------------------------------------------

channel_status channel_model_embed(const channel_model* model, const int32_t* tokens,
                                   size_t n_tokens, int32_t n_threads, float* out,
                                   size_t capacity) {
  return guarded(CHANNEL_ERR_ARGUMENT, [&] {
    require(model, "model");
    if (n_tokens > 0) require(tokens, "tokens");
    if (n_threads < 0) fail(CHANNEL_ERR_ARGUMENT, "n_threads must be >= 0, got {}", n_threads);
    const size_t dim = static_cast<size_t>(model->model->hparams().n_embd);
    require(out, "out");
    if (capacity < dim)
      fail(CHANNEL_ERR_BUFFER, "an embedding of {} floats does not fit a buffer of {}", dim,
           capacity);
    Embedder embedder(model->model, n_threads);
    const std::vector<float> v = embedder.embed({tokens, n_tokens});
    std::copy(v.begin(), v.end(), out);
  });
}

channel_status channel_embedder_create(channel_model* model, const char* device, int32_t n_ctx,
                                       int32_t n_threads, channel_embedder** out) {
  return guarded(CHANNEL_ERR_ARGUMENT, [&] {
    require(model, "model");
    require(out, "out");
    if (n_ctx < 1) fail(CHANNEL_ERR_ARGUMENT, "n_ctx must be >= 1, got {}", n_ctx);
    if (n_threads < 0) fail(CHANNEL_ERR_ARGUMENT, "n_threads must be >= 0, got {}", n_threads);
    DeviceSpec where;
    try {
      where = parse_device(device != nullptr && device[0] != '\0' ? device : "cpu");
    } catch (const Error& e) {
      fail(CHANNEL_ERR_ARGUMENT, "{}", e.what());
    }
    auto e = std::make_unique<channel_embedder>();
    e->model = model->model;
    try {
      e->context = context_session_for(e->model, where, n_ctx, n_threads).session;
    } catch (const Error& err) {  // no driver or device, a model the device cannot run
      fail(where.is_cuda() ? CHANNEL_ERR_UNAVAILABLE : CHANNEL_ERR_ARGUMENT, "{}", err.what());
    }
    SessionBase* context = e->context.get();
    e->embedder = std::make_unique<Embedder>(
        e->model, [context](std::span<const int32_t> tokens, std::vector<float>& rows) {
          context->reset();
          context->hidden_states(tokens, rows);
        });
    *out = e.release();
  });
}

channel_status channel_embedder_embed(channel_embedder* embedder, const int32_t* tokens,
                                      size_t n_tokens, float* out, size_t capacity) {
  return guarded(CHANNEL_ERR_ARGUMENT, [&] {
    require(embedder, "embedder");
    if (n_tokens > 0) require(tokens, "tokens");
    require(out, "out");
    const size_t dim = static_cast<size_t>(embedder->model->hparams().n_embd);
    if (capacity < dim)
      fail(CHANNEL_ERR_BUFFER, "an embedding of {} floats does not fit a buffer of {}", dim,
           capacity);
    const std::vector<float> v = embedder->embedder->embed({tokens, n_tokens});
    std::copy(v.begin(), v.end(), out);
  });
}

void channel_embedder_free(channel_embedder* embedder) {
  delete embedder;
}

channel_status channel_tokenize(const channel_model* model, const char* text, size_t text_len,
                                int add_bos, int parse_special, int32_t* tokens, size_t capacity,
                                size_t* n_tokens) {
  return guarded(CHANNEL_ERR_ARGUMENT, [&] {
    require(model, "model");
    require(n_tokens, "n_tokens");
    if (text_len > 0) require(text, "text");
    if (capacity > 0) require(tokens, "tokens");
    if (add_bos != 0 && add_bos != 1 && add_bos != CHANNEL_ADD_BOS_DEFAULT)
      fail(CHANNEL_ERR_ARGUMENT, "add_bos must be 0, 1 or CHANNEL_ADD_BOS_DEFAULT, got {}",
           add_bos);
    const Tokenizer& tok = model->model->tokenizer();
    const bool bos = add_bos == CHANNEL_ADD_BOS_DEFAULT ? tok.add_bos_default() : add_bos == 1;
    const std::vector<int32_t> ids =
        tok.encode(std::string_view(text ? text : "", text_len), bos, parse_special != 0);
    if (ids.size() > capacity) {
      *n_tokens = ids.size();
      fail(CHANNEL_ERR_BUFFER, "{} tokens do not fit a buffer of {}", ids.size(), capacity);
    }
    std::copy(ids.begin(), ids.end(), tokens);
    *n_tokens = ids.size();
  });
}

channel_status channel_detokenize(const channel_model* model, const int32_t* tokens,
                                  size_t n_tokens, char* text, size_t capacity, size_t* text_len) {
  return guarded(CHANNEL_ERR_ARGUMENT, [&] {
    require(model, "model");
    require(text_len, "text_len");
    if (n_tokens > 0) require(tokens, "tokens");
    if (capacity > 0) require(text, "text");
    const Tokenizer& tok = model->model->tokenizer();
    const std::span<const int32_t> ids(tokens, n_tokens);
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i] < 0 || ids[i] >= tok.n_vocab())
        fail(CHANNEL_ERR_ARGUMENT, "token id {} at index {} is outside the vocabulary (n_vocab {})",
             ids[i], i, tok.n_vocab());
    const std::string s = tok.decode(ids);
    if (s.size() + 1 > capacity) {
      *text_len = s.size();
      fail(CHANNEL_ERR_BUFFER, "{} bytes of text (+1 for the NUL) do not fit a buffer of {}",
           s.size(), capacity);
    }
    std::memcpy(text, s.data(), s.size());
    text[s.size()] = '\0';
    *text_len = s.size();
  });
}

int channel_token_is_eog(const channel_model* model, int32_t token) {
  if (model == nullptr) return 0;
  const Tokenizer& tok = model->model->tokenizer();
  if (token < 0 || token >= tok.n_vocab()) return 0;
  return tok.is_end_of_generation(token) ? 1 : 0;
}

// ---- sessions ----------------------------------------------------------------------------

channel_session_params channel_session_default_params(void) {
  channel_session_params p{};
  p.n_slots = SlotGeometry::kDefaultSlots;
  p.n_recall = SlotGeometry::kDefaultRecall;
  p.probe_reserve = 0;
  p.n_threads = 0;
  p.n_batch = 64;
  p.device = nullptr;
  return p;
}

channel_sampler_params channel_sampler_default_params(void) {
  const SamplerConfig c;
  channel_sampler_params p{};
  p.temperature = c.temperature;
  p.top_k = c.top_k;
  p.top_p = c.top_p;
  p.min_p = c.min_p;
  p.repeat_penalty = c.repeat_penalty;
  p.repeat_last_n = c.repeat_last_n;
  p.seed = c.seed;
  p.presence_penalty = c.presence_penalty;
  p.frequency_penalty = c.frequency_penalty;
  p.logit_bias = nullptr;
  p.n_logit_bias = 0;
  return p;
}

channel_status channel_session_create(channel_model* model, const channel_session_params* params,
                                      const channel_sampler_params* sampler,
                                      channel_session** out) {
  return guarded(CHANNEL_ERR_ARGUMENT, [&] {
    require(model, "model");
    require(out, "out");
    const RingSessionConfig config = session_config(params);
    const SamplerConfig sampling = sampler_config(sampler, model->model->hparams().n_vocab);
    auto s = std::make_unique<channel_session>();
    s->model = model->model;
    s->stream = std::make_unique<StreamSession>(s->model, config, sampling);
    *out = s.release();
  });
}

void channel_session_free(channel_session* session) {
  delete session;
}

channel_status channel_session_append(channel_session* session, channel_span_type type,
                                      const int32_t* tokens, size_t n_tokens) {
  return guarded(CHANNEL_ERR_STATE, [&] {
    require_session(session);
    const SpanType t = span_type(type);
    session->stream->append(t, token_span(session, tokens, n_tokens));
  });
}

channel_status channel_session_feed(channel_session* session, channel_span_type type,
                                    const int32_t* tokens, size_t n_tokens) {
  return guarded(CHANNEL_ERR_STATE, [&] {
    require_session(session);
    const SpanType t = span_type(type);
    session->stream->feed(t, token_span(session, tokens, n_tokens));
  });
}

channel_status channel_session_decode(channel_session* session, const int32_t* tokens,
                                      size_t n_tokens) {
  return guarded(CHANNEL_ERR_STATE, [&] {
    require_session(session);
    session->stream->decode(token_span(session, tokens, n_tokens));
  });
}

channel_status channel_session_seal(channel_session* session) {
  return guarded(CHANNEL_ERR_STATE, [&] {
    require_session(session);
    session->stream->seal();
  });
}

const float* channel_session_logits(const channel_session* session, size_t* n_vocab) {
  if (session == nullptr) {
    set_last_error("session is NULL");
    return nullptr;
  }
  const std::span<const float> logits = session->stream->logits();
  if (n_vocab) *n_vocab = logits.size();
  return logits.data();
}

channel_status channel_session_probe(channel_session* session, channel_span_type type,
                                     const int32_t* tokens, size_t n_tokens, float* logits,
                                     size_t capacity) {
  return guarded(CHANNEL_ERR_STATE, [&] {
    require_session(session);
    const SpanType t = span_type(type);
    const auto span = token_span(session, tokens, n_tokens);
    const size_t n_vocab = static_cast<size_t>(session->model->hparams().n_vocab);
    require(logits, "logits");
    if (capacity < n_vocab)
      fail(CHANNEL_ERR_BUFFER, "logits buffer of {} floats, the vocabulary has {}", capacity,
           n_vocab);
    const std::vector<float> out = session->stream->ring_session().probe(span, t);
    std::copy(out.begin(), out.end(), logits);
  });
}

uint32_t channel_session_max_probe(const channel_session* session) {
  return session ? session->stream->ring_session().max_probe() : 0;
}

channel_status channel_session_set_sampler(channel_session* session,
                                           const channel_sampler_params* params) {
  return guarded(CHANNEL_ERR_ARGUMENT, [&] {
    require_session(session);
    require(params, "params");
    session->stream->set_sampler(sampler_config(params, n_vocab(session)));
  });
}

channel_status channel_session_get_sampler(const channel_session* session,
                                           channel_sampler_params* out) {
  return guarded(CHANNEL_ERR_ARGUMENT, [&] {
    require_session(session);
    require(out, "out");
    const SamplerConfig& c = session->stream->sampler().config();
    std::vector<channel_logit_bias> bias;
    for (const LogitEdit& e : c.logit_bias) bias.push_back({e.id, e.delta});
    const auto same = [](const channel_logit_bias& a, const channel_logit_bias& b) {
      return a.token == b.token && a.bias == b.bias;
    };
    if (!std::equal(bias.begin(), bias.end(), session->logit_bias_view.begin(),
                    session->logit_bias_view.end(), same))
      session->logit_bias_view = std::move(bias);  // an earlier pointer stays good otherwise
    *out = {c.temperature,
            c.top_k,
            c.top_p,
            c.min_p,
            c.repeat_penalty,
            c.repeat_last_n,
            c.seed,
            c.presence_penalty,
            c.frequency_penalty,
            session->logit_bias_view.empty() ? nullptr : session->logit_bias_view.data(),
            session->logit_bias_view.size()};
  });
}

channel_status channel_session_update_sampler(channel_session* session,
                                              const channel_sampler_params* params) {
  return guarded(CHANNEL_ERR_ARGUMENT, [&] {
    require_session(session);
    require(params, "params");
    Sampler& s = session->stream->sampler();
    s = s.reconfigured(sampler_config(params, n_vocab(session)));
  });
}

channel_status channel_session_sample(channel_session* session, int32_t* token) {
  return guarded(CHANNEL_ERR_STATE, [&] {
    require_session(session);
    require(token, "token");
    if (session->stream->clock() == 0)
      fail(CHANNEL_ERR_STATE, "sample: no tokens appended yet, so there are no logits");
    *token = session->stream->sampler().sample(session->stream->logits());
  });
}

channel_status channel_session_generate(channel_session* session, int64_t max_tokens,
                                        channel_eog_policy eog, channel_token_callback callback,
                                        void* user_data, int64_t* n_generated,
                                        channel_stop_reason* stop) {
  int64_t n = 0;
  channel_stop_reason why = CHANNEL_STOP_MAX_TOKENS;
  const channel_status status = guarded(CHANNEL_ERR_STATE, [&] {
    require_session(session);
    if (max_tokens < 0) fail(CHANNEL_ERR_ARGUMENT, "max_tokens must be >= 0, got {}", max_tokens);
    if (eog != CHANNEL_EOG_STOP && eog != CHANNEL_EOG_TURN_END)
      fail(CHANNEL_ERR_ARGUMENT, "eog policy {} out of range", static_cast<int>(eog));
    if (session->stream->clock() == 0)
      fail(CHANNEL_ERR_STATE, "generate: no tokens appended yet, so there are no logits");
    const EogPolicy policy = eog == CHANNEL_EOG_STOP ? EogPolicy::stop : EogPolicy::turn_end;
    StreamGenerateCallbacks on;
    on.before_token = [&] {
      // A condition-C recall whose query finished lands here, between two tokens.
      if (session->auto_recall) (void)session->auto_recall->poll();
      return true;
    };
    on.on_token = [&](const GeneratedToken& g) {
      ++n;
      return !callback || callback(g.token, g.text.data(), g.text.size(), user_data) == 0;
    };
    const StreamGenerateResult r = generate_stream(*session->stream, max_tokens, policy, on);
    if (r.stop == StopReason::end_of_generation) why = CHANNEL_STOP_EOG;
    if (r.stop == StopReason::cancelled) why = CHANNEL_STOP_CALLBACK;
  });
  if (n_generated) *n_generated = n;
  if (stop) *stop = why;
  return status;
}

// ---- geometry and spans ------------------------------------------------------------------

channel_status channel_session_get_geometry(const channel_session* session, channel_geometry* out) {
  return guarded(CHANNEL_ERR_INTERNAL, [&] {
    require_session(session);
    require(out, "out");
    const RingSession& rs = session->stream->ring_session();
    const SlotRing& ring = rs.ring();
    channel_geometry g{};
    g.clock = ring.clock();
    g.n_slots = ring.config().n_slots;
    g.n_recall = ring.config().n_recall;
    g.anchors = ring.n_sys();
    g.sealed = ring.sealed() ? 1 : 0;
    g.window_used = ring.sealed() ? ring.window_live() : 0;
    g.window_capacity = ring.sealed() ? ring.window_capacity() : 0;
    g.recall_used = ring.recall_used();
    g.spans = ring.window_span_count();
    g.anchor_spans = ring.anchor_spans().size();
    g.evicted_spans = ring.evicted_spans();
    g.max_distance = rs.max_distance();
    g.kv_bytes = rs.kv_bytes();
    *out = g;
  });
}

channel_status channel_session_get_spans(const channel_session* session, channel_span* spans,
                                         size_t capacity, size_t* n_spans) {
  return guarded(CHANNEL_ERR_INTERNAL, [&] {
    require_session(session);
    require(n_spans, "n_spans");
    const SlotRing& ring = session->stream->ring_session().ring();
    const size_t n_anchor = ring.anchor_spans().size();
    const size_t n = n_anchor + ring.window_span_count();
    if (n > capacity) {
      *n_spans = n;
      fail(CHANNEL_ERR_BUFFER, "{} spans do not fit a buffer of {}", n, capacity);
    }
    require(spans, "spans");
    for (size_t i = 0; i < n; ++i) {
      const SemanticSpan& s =
          i < n_anchor ? ring.anchor_spans()[i] : ring.window_span(i - n_anchor);
      spans[i] = channel_span{static_cast<channel_span_type>(s.span_type),
                              i < n_anchor ? 1 : 0,
                              s.start_clock,
                              s.end_clock,
                              s.start_slot,
                              s.slot_count};
    }
    *n_spans = n;
  });
}

// ---- session files -----------------------------------------------------------------------

channel_status channel_session_save(const channel_session* session, const char* path) {
  return guarded(CHANNEL_ERR_IO, [&] {
    require_session(session);
    require(path, "path");
    save_session_file(path, *session->stream);
  });
}

channel_status channel_session_load(channel_model* model, const char* path,
                                    const channel_session_params* params, channel_session** out) {
  return guarded(CHANNEL_ERR_FORMAT, [&] {
    require(model, "model");
    require(path, "path");
    require(out, "out");
    const RingSessionConfig config = session_config(params);
    require_readable(path);
    auto s = std::make_unique<channel_session>();
    s->model = model->model;
    s->stream = load_session_file(path, s->model, config);
    *out = s.release();
  });
}

}  // extern "C"
