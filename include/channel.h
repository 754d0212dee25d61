/* channel.h: Channel's public C API. Load a model, tokenize, run a session that streams
 * forever through the fixed KV slot geometry (anchors, FIFO window, recall slots), sample,
 * probe, read the geometry and spans, and save/restore whole sessions to files.
 *
 * Conventions (docs/c-api.md):
 * - Handles are opaque. Every function that can fail returns a channel_status; on failure
 *   channel_last_error() gives a one-line message for this thread, and output parameters
 *   are left unchanged. No C++ exception ever crosses this boundary.
 * - A session is used by one thread at a time. Models are immutable once loaded and may be
 *   shared by sessions on any threads; a session keeps its model alive, so
 *   channel_model_free() may come before the sessions are freed.
 * - Free functions accept NULL. */
#ifndef CHANNEL_H
#define CHANNEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CHANNEL_API_VERSION 1

typedef enum channel_status {
  CHANNEL_OK = 0,
  CHANNEL_ERR_ARGUMENT = 1,    /* NULL handle, value out of range, token outside the vocabulary */
  CHANNEL_ERR_STATE = 2,       /* not possible in the session's state (anchors too long, probe
                                  longer than the free window, nothing to sample from, ...) */
  CHANNEL_ERR_IO = 3,          /* a file cannot be opened, read or written */
  CHANNEL_ERR_FORMAT = 4,      /* a model or session file is corrupt, truncated or mismatched */
  CHANNEL_ERR_BUFFER = 5,      /* an output buffer is too small: *n_out holds the size needed */
  CHANNEL_ERR_UNAVAILABLE = 6, /* e.g. no default model is built into this program */
  CHANNEL_ERR_NO_MEMORY = 7,
  CHANNEL_ERR_INTERNAL = 8
} channel_status;

/* The message of the last failed call on this thread ("" after a successful one). The
 * pointer is valid until the next channel_* call on this thread. */
const char* channel_last_error(void);
/* "ok", "argument", "state", "io", "format", "buffer", "unavailable", "no memory", "internal". */
const char* channel_status_name(channel_status status);

/* ---- models -------------------------------------------------------------------------- */

typedef struct channel_model channel_model;

/* A GGUF file (llama or gemma3 for sessions; memory-mapped, read-only). */
channel_status channel_model_load(const char* path, channel_model** out);
/* GGUF bytes that the caller keeps alive and unchanged until every session of the model and
 * the model itself are freed. `name` names the model in messages (may be NULL). */
channel_status channel_model_load_memory(const void* data, size_t size, const char* name,
                                         channel_model** out);
/* The default model built into the program. Defined by the library that embeds it (the
 * `channel_embedded` target, which the channel CLI links); CHANNEL_ERR_UNAVAILABLE when
 * the build had no models/channel-bounded.gguf (the built-in model). */
channel_status channel_model_load_default(channel_model** out);
/* The loads above with options. params may be NULL (no options). */
typedef void (*channel_load_progress_fn)(float fraction, void* user_data);
typedef struct channel_model_load_params {
  /* Called on the loading thread with the fraction done (0..1, never falling; 0 first and 1
   * last on success), user_data as given. NULL: no progress. */
  channel_load_progress_fn progress;
  void* progress_user_data;
} channel_model_load_params;
channel_status channel_model_load_ex(const char* path, const channel_model_load_params* params,
                                     channel_model** out);
channel_status channel_model_load_memory_ex(const void* data, size_t size, const char* name,
                                            const channel_model_load_params* params,
                                            channel_model** out);
channel_status channel_model_load_default_ex(const channel_model_load_params* params,
                                             channel_model** out);
/* A deterministic random-weight model (as `channel mkmodel` writes), for tests and
 * benchmarks. arch: "llama" or "gemma3". Sizes left 0 take small defaults. */
typedef struct channel_random_model_params {
  const char* arch;
  int32_t n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_vocab;
  int32_t sliding_window; /* gemma3: every third layer is global, the others slide */
  uint64_t seed;
} channel_random_model_params;
channel_status channel_model_create_random(const channel_random_model_params* params,
                                           channel_model** out);
void channel_model_free(channel_model* model);

typedef struct channel_model_info {
  char arch[32];
  int32_t n_layer, n_embd, n_head, n_head_kv, head_dim, n_vocab;
  int32_t n_ctx_train;
  int32_t sliding_window; /* 0: none */
  uint64_t weight_bytes;
  uint64_t model_id; /* the identity session files are bound to */
} channel_model_info;
channel_status channel_model_get_info(const channel_model* model, channel_model_info* out);

/* ---- tokens -------------------------------------------------------------------------- */

#define CHANNEL_ADD_BOS_DEFAULT (-1) /* add a BOS token when the model asks for one */

/* Tokenizes text[0..text_len) into tokens[0..capacity). Sets *n_tokens to the count; when
 * it exceeds capacity, returns CHANNEL_ERR_BUFFER (call again with a larger buffer).
 * add_bos: 0, 1 or CHANNEL_ADD_BOS_DEFAULT; parse_special: 1 turns "<bos>"-style text
 * into control tokens. */
channel_status channel_tokenize(const channel_model* model, const char* text, size_t text_len,
                                int add_bos, int parse_special, int32_t* tokens, size_t capacity,
                                size_t* n_tokens);
/* Writes the text of tokens (control tokens print nothing) and a terminating NUL into
 * text[0..capacity). *text_len gets the length without the NUL; CHANNEL_ERR_BUFFER when
 * text_len + 1 > capacity. */
channel_status channel_detokenize(const channel_model* model, const int32_t* tokens,
                                  size_t n_tokens, char* text, size_t capacity, size_t* text_len);
/* 1 for tokens that end a reply (eos, <end_of_turn>, ...), 0 otherwise or out of range. */
int channel_token_is_eog(const channel_model* model, int32_t token);

/* ---- embeddings ---------------------------------------------------------------------- */

/* The unit embedding of tokens[0..n_tokens) into out[0..n_embd): the mean of their
 * final-norm hidden states scaled to length 1 (a leading BOS is run but not averaged), made
 * as episodic memory makes an episode's centroid and a recall cue. Runs a contiguous
 * session of n_tokens on the CPU with n_threads (0: one per hardware thread); the model may
 * be shared with sessions meanwhile. CHANNEL_ERR_BUFFER when capacity < n_embd
 * (channel_model_info), CHANNEL_ERR_ARGUMENT for no tokens of its own or an id outside the
 * vocabulary. */
channel_status channel_model_embed(const channel_model* model, const int32_t* tokens,
                                   size_t n_tokens, int32_t n_threads, float* out, size_t capacity);

/* The same embeddings from a context kept between calls, on `device` (NULL or "cpu", "cuda",
 * "cuda:N"; on a device the model is uploaded once, here): for many texts, and on a GPU.
 * Each call takes at most n_ctx tokens (CHANNEL_ERR_ARGUMENT beyond; n_ctx >= 1). Errors at
 * create: CHANNEL_ERR_ARGUMENT for a bad device name or a build without CUDA,
 * CHANNEL_ERR_UNAVAILABLE when there is no usable device or the model does not run or fit
 * there. An embedder is used by one thread at a time. */
typedef struct channel_embedder channel_embedder;
channel_status channel_embedder_create(channel_model* model, const char* device, int32_t n_ctx,
                                       int32_t n_threads, channel_embedder** out);
channel_status channel_embedder_embed(channel_embedder* embedder, const int32_t* tokens,
                                      size_t n_tokens, float* out, size_t capacity);
void channel_embedder_free(channel_embedder* embedder);

/* ---- sessions ------------------------------------------------------------------------ */

typedef struct channel_session channel_session;

typedef enum channel_span_type {
  CHANNEL_SPAN_SYSTEM = 0,
  CHANNEL_SPAN_USER = 1,
  CHANNEL_SPAN_THOUGHT = 2,
  CHANNEL_SPAN_TOOL_CALL = 3,
  CHANNEL_SPAN_TOOL_RESULT = 4,
  CHANNEL_SPAN_RESPONSE_SENTENCE = 5,
  CHANNEL_SPAN_TURN_END = 6,
  CHANNEL_SPAN_MAX_ENUM_ = 0x7fffffff /* not a type: makes any int32 a representable value */
} channel_span_type;

typedef struct channel_session_params {
  uint32_t n_slots;       /* KV slots per global layer (default 4096) */
  uint32_t n_recall;      /* recall slots, tier 3 (default 128) */
  uint32_t probe_reserve; /* window slots kept free for probes (default 0) */
  int32_t n_threads;      /* 0: one per hardware thread */
  int32_t n_batch;        /* most tokens per forward chunk (default 64) */
  const char* device;     /* where the forward and the K/V live: NULL or "cpu" (default),
                             "cuda" or "cuda:N" (CHANNEL_ERR_ARGUMENT where this build has no
                             CUDA backend, CHANNEL_ERR_UNAVAILABLE when there is no usable
                             device or the model does not run or fit there) */
} channel_session_params;

/* Added to one token's logit before sampling (OpenAI's logit_bias: -100 bans, +100 forces). */
typedef struct channel_logit_bias {
  int32_t token;
  float bias;
} channel_logit_bias;

typedef struct channel_sampler_params {
  float temperature;     /* 0: greedy (default 0.8) */
  int32_t top_k;         /* <= 0: off (40) */
  float top_p;           /* >= 1: off (0.95) */
  float min_p;           /* <= 0: off (0.05) */
  float repeat_penalty;  /* 1: off (1) */
  int32_t repeat_last_n; /* (64) */
  uint64_t seed;         /* (42) */
  /* OpenAI's penalties over the same last repeat_last_n tokens: a token seen c times there
   * loses c * frequency_penalty + presence_penalty from its logit. 0: off (0). */
  float presence_penalty;
  float frequency_penalty;
  /* n_logit_bias entries (0: none); the array is copied. From channel_session_get_sampler
   * it is the session's own copy, valid until the sampler next changes or the session is
   * freed. A token outside the vocabulary is CHANNEL_ERR_ARGUMENT. Session files do not keep
   * the penalties or the bias: a resumed session has them off. */
  const channel_logit_bias* logit_bias;
  size_t n_logit_bias;
} channel_sampler_params;

channel_session_params channel_session_default_params(void);
channel_sampler_params channel_sampler_default_params(void);

/* Allocates every K/V arena now (never again). sampler may be NULL (defaults).
 * CHANNEL_ERR_ARGUMENT for a geometry that cannot hold a window or a sliding window. */
channel_status channel_session_create(channel_model* model, const channel_session_params* params,
                                      const channel_sampler_params* sampler, channel_session** out);
void channel_session_free(channel_session* session);

/* One new span of `type` holding the tokens (before seal: anchors, the system prompt).
 * Every token enters the sampler's repetition history. The logits of the last token are
 * then available from channel_session_logits. */
channel_status channel_session_append(channel_session* session, channel_span_type type,
                                      const int32_t* tokens, size_t n_tokens);
/* Text tokens cut into spans of `type` at sentence ends; text fed in pieces continues
 * its sentence (the first token starts a new span only after other input). */
channel_status channel_session_feed(channel_session* session, channel_span_type type,
                                    const int32_t* tokens, size_t n_tokens);
/* Appends to the newest span (CHANNEL_ERR_STATE when none was begun). */
channel_status channel_session_decode(channel_session* session, const int32_t* tokens,
                                      size_t n_tokens);
/* Ends the cold boot: the tokens so far become the immutable anchors. */
channel_status channel_session_seal(channel_session* session);

/* The last token's logits, [n_vocab] (zeros before any token); valid until the next call
 * that appends, decodes, generates or restores. */
const float* channel_session_logits(const channel_session* session, size_t* n_vocab);

/* Runs transient tokens as a span of `type` and rolls back: logits[0..capacity) gets the
 * last token's logits (capacity >= n_vocab, else CHANNEL_ERR_BUFFER); the session is left
 * exactly as before. CHANNEL_ERR_STATE before seal or beyond channel_session_max_probe. */
channel_status channel_session_probe(channel_session* session, channel_span_type type,
                                     const int32_t* tokens, size_t n_tokens, float* logits,
                                     size_t capacity);
uint32_t channel_session_max_probe(const channel_session* session);

/* Replaces the sampler: the RNG restarts from params->seed and the history empties. */
channel_status channel_session_set_sampler(channel_session* session,
                                           const channel_sampler_params* params);
/* The sampler's current settings (a resumed session's are the saved ones). */
channel_status channel_session_get_sampler(const channel_session* session,
                                           channel_sampler_params* out);
/* Changes the sampler's settings and goes on from its state: the RNG stream continues while
 * params->seed is unchanged (a new seed starts that seed's stream), and the repetition
 * history keeps its newest repeat_last_n tokens. */
channel_status channel_session_update_sampler(channel_session* session,
                                              const channel_sampler_params* params);
/* Samples a token from the current logits without feeding it (nor recording it). */
channel_status channel_session_sample(channel_session* session, int32_t* token);

/* Generation. Each token is sampled, recorded and fed back at once (so the session can be
 * saved or continued after any token), into response_sentence spans cut at sentence ends. */
typedef enum channel_eog_policy {
  CHANNEL_EOG_STOP = 0,              /* an end-of-generation token ends the call and is not fed */
  CHANNEL_EOG_TURN_END = 1,          /* it is fed as a turn_end span and generation goes on */
  CHANNEL_EOG_MAX_ENUM_ = 0x7fffffff /* not a policy (see CHANNEL_SPAN_MAX_ENUM_) */
} channel_eog_policy;
typedef enum channel_stop_reason {
  CHANNEL_STOP_MAX_TOKENS = 0,
  CHANNEL_STOP_EOG = 1,
  CHANNEL_STOP_CALLBACK = 2
} channel_stop_reason;
/* Called after each generated token was fed: `text` is the UTF-8 the token completed (not
 * NUL-terminated, may be empty; valid during the call). The callback may call the
 * read-only functions (geometry, spans, logits) but not change the session. Return
 * nonzero to stop. */
typedef int (*channel_token_callback)(int32_t token, const char* text, size_t text_len,
                                      void* user_data);
/* Generates at most max_tokens tokens (callback may be NULL). *n_generated (may be NULL)
 * counts the tokens fed; *stop (may be NULL) says why it ended. */
channel_status channel_session_generate(channel_session* session, int64_t max_tokens,
                                        channel_eog_policy eog, channel_token_callback callback,
                                        void* user_data, int64_t* n_generated,
                                        channel_stop_reason* stop);

/* ---- geometry and spans -------------------------------------------------------------- */

typedef struct channel_geometry {
  uint64_t clock; /* tokens written since cold boot (the next token's clock) */
  uint32_t n_slots, n_recall;
  uint32_t anchors; /* N_sys: anchor tokens (so far, before seal) */
  int32_t sealed;
  uint32_t window_used;     /* live window tokens */
  uint32_t window_capacity; /* window slots that may be live (0 before seal) */
  uint32_t recall_used;     /* live recall slots */
  uint64_t spans;           /* live window spans */
  uint64_t anchor_spans;
  uint64_t evicted_spans; /* since cold boot (cut pieces count one each) */
  uint64_t max_distance;  /* the largest query-key distance seen (< n_slots) */
  uint64_t kv_bytes;      /* K/V arenas, allocated at creation */
} channel_geometry;
channel_status channel_session_get_geometry(const channel_session* session, channel_geometry* out);

typedef struct channel_span {
  channel_span_type type;
  int32_t anchor;       /* 1 for anchor spans */
  uint64_t start_clock; /* [start_clock, end_clock) */
  uint64_t end_clock;
  uint32_t start_slot;
  uint32_t slot_count;
} channel_span;
/* Anchor spans, then the live window spans, oldest first, into spans[0..capacity);
 * *n_spans gets the count (CHANNEL_ERR_BUFFER when it exceeds capacity). */
channel_status channel_session_get_spans(const channel_session* session, channel_span* spans,
                                         size_t capacity, size_t* n_spans);

/* ---- session files ------------------------------------------------------------------- */

/* Saves the whole session (model id, geometry, ring state, live K/V, logits, sampler and
 * span state, checksum) atomically: PATH.tmp, fsync, rename, fsync of the directory. On
 * failure PATH is untouched. CHANNEL_ERR_IO for file errors. */
channel_status channel_session_save(const channel_session* session, const char* path);
/* A session resumed from a file of channel_session_save: the next logits are bit-identical
 * to the saved session's. params gives threads and batch; its geometry must equal the
 * file's. CHANNEL_ERR_IO when the file cannot be read, CHANNEL_ERR_FORMAT when it is
 * corrupt, truncated, or of another model or geometry; the file is never modified. */
channel_status channel_session_load(channel_model* model, const char* path,
                                    const channel_session_params* params, channel_session** out);

/* ---- episodic memory (docs/memory-format.md, ".episodic.mem") ------------------------- */

/* Attaches the episodic store PATH to the session, creating it for the session's model when
 * it does not exist (room for max_episodes episodes of up to 64 tokens). From then on what
 * leaves the window is consolidated into it by a background thread; channel_session_free
 * writes what is still staged. CHANNEL_ERR_FORMAT for a store of another model or a damaged
 * one (the file is left untouched), CHANNEL_ERR_STATE when one is already attached. */
channel_status channel_session_attach_memory(channel_session* session, const char* path,
                                             uint32_t max_episodes);
/* Recalls into the recall slots the k stored episodes closest to a text cue (encoded as the
 * episodes' centroids are); *n_recalled (may be NULL) gets how many. The least recently
 * recalled episodes make room. CHANNEL_ERR_STATE without an attached store. */
channel_status channel_session_recall_text(channel_session* session, const char* text,
                                           size_t text_len, size_t k, size_t* n_recalled);
/* Writes what is staged and waits for the writer. With include_window != 0 the tokens still
 * in the window are stored too: for a session that ends without being saved (a saved and
 * resumed session would store them twice). */
channel_status channel_session_memory_flush(channel_session* session, int include_window);

/* ---- automatic recall (docs/c-api.md, "Automatic recall") ------------------------------- */

typedef enum channel_recall_method {
  CHANNEL_RECALL_AUTO = 0,     /* proj if the model has a retrieval head and the store its
                                  vectors, else keys if the store has them, else centroid */
  CHANNEL_RECALL_CENTROID = 1, /* cosine of the mean final hidden state (spec 003) */
  CHANNEL_RECALL_KEYS = 2,     /* the model's queries against representative keys */
  CHANNEL_RECALL_PROJ = 3,     /* the trained retrieval head */
  CHANNEL_RECALL_HYBRID = 4,   /* z(centroid) + z(keys) */
  CHANNEL_RECALL_MAX_ENUM_ = 0x7fffffff
} channel_recall_method;

/* One recall: what the cue found and what changed in tier 3. Arrays are valid during the
 * callback only. */
typedef struct channel_recall_event {
  const char* reason; /* "turn", "velocity" or "explicit" */
  const char* method; /* the method used: "centroid", "keys", "proj", "hybrid" */
  uint64_t clock;     /* session clock when the cue was taken */
  size_t n_hits;      /* the top-k, best first */
  const uint64_t* hit_ids;
  const float* hit_scores;
  size_t n_recalled; /* newly placed in tier 3 */
  const uint64_t* recalled;
  size_t n_kept; /* already in tier 3 and kept */
  const uint64_t* kept;
  size_t n_released; /* taken out of tier 3 */
  const uint64_t* released;
  size_t n_neighbours; /* recalled as a hit's temporal neighbour */
  const uint64_t* neighbours;
  size_t n_skipped; /* damaged records, skipped (a warning went to stderr) */
  const uint64_t* skipped;
  double query_ms, recall_ms;
  size_t n_below_gate; /* hits not placed: scored under min_score_ratio of the best */
  const uint64_t* below_gate;
} channel_recall_event;

typedef void (*channel_recall_callback)(const channel_recall_event* event, void* user_data);

typedef struct channel_auto_recall_params {
  channel_recall_method method; /* (CHANNEL_RECALL_AUTO) */
  uint32_t k;                   /* episodes per recall (2) */
  uint32_t neighbours;          /* temporal neighbours per hit when tier 3 has room (0) */
  float velocity_factor;        /* condition C: ||dx|| above this times its running mean
                                   starts a background recall; <= 0 off (0) */
  uint32_t cooldown_tokens;     /* tokens between two condition-C recalls (256) */
  channel_recall_callback callback; /* every recall event; may be NULL */
  void* user_data;
  float lexical;                /* weight of the lexical half of hybrid recall: names and rare
                                   words the cue shares with an episode (64); 0 off */
  float min_score_ratio;        /* a hit after the best is placed in tier 3 only when it scores
                                   at least this share of the best (0.9); 0 places the whole
                                   top-k */
} channel_auto_recall_params;

channel_auto_recall_params channel_auto_recall_default_params(void);
/* Recall copy: while episodes are in tier 3, a token that continues, in one of them, the run of
 * tokens the context ends with (two or more) gets `bias` added to its logit for each doubling
 * of the run's length up to four tokens, before sampling (a recalled name or code is copied whole). On with 3
 * when a store is attached; 0 turns it off. CHANNEL_ERR_STATE without a store,
 * CHANNEL_ERR_ARGUMENT outside 0..20. */
channel_status channel_session_set_recall_copy(channel_session* session, float bias);
/* Turns automatic recall on (params != NULL) or off (NULL) for the attached store:
 * channel_session_recall_turn at turn boundaries, condition-C recalls landed by
 * channel_session_generate between tokens and by channel_session_recall_poll.
 * CHANNEL_ERR_STATE without a store; CHANNEL_ERR_ARGUMENT for a method the model or the store
 * cannot serve. */
channel_status channel_session_set_auto_recall(channel_session* session,
                                               const channel_auto_recall_params* params);
/* A turn boundary: recall with the last token's state as the cue (tier 3 refreshed as a
 * cache). background == 0: before this call returns, so that what is computed next sees it;
 * != 0: the query and the record reads run on the recall thread and the recall lands at a
 * later channel_session_recall_poll or generated token (for boundaries no reply waits on;
 * dropped when a query is in flight). CHANNEL_ERR_STATE without automatic recall. */
channel_status channel_session_recall_turn(channel_session* session, int background);
/* Feeds a user turn's tokens so that the reply already sees the recall: all but the last
 * token are fed, the last one's state is taken by a probe (or, with no probe room, the
 * state before it), recalled by, and then fed. Without automatic recall, a plain feed. */
channel_status channel_session_feed_turn(channel_session* session, const int32_t* tokens,
                                         size_t n_tokens);
/* Lands a condition-C recall whose background query finished (a no-op when none). */
channel_status channel_session_recall_poll(channel_session* session);
/* Explicit foreground replay (seed 003): the stored episode's tokens are fed into the main
 * stream as a user span (they get new K/V at the current clock); *n_tokens (may be NULL)
 * gets how many. CHANNEL_ERR_STATE without a store, CHANNEL_ERR_ARGUMENT for an unknown id,
 * CHANNEL_ERR_FORMAT for a damaged record (nothing is fed). */
channel_status channel_session_replay(channel_session* session, uint64_t episode_id,
                                      size_t* n_tokens);

#ifdef __cplusplus
}
#endif

#endif /* CHANNEL_H */
