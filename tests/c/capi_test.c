/* The C API end to end, compiled as C11 against include/channel.h alone: a random gemma3
 * model, tokenize/detokenize, a small slot geometry driven through append, feed, seal,
 * generate (evicting), probe and the geometry/span readers; a session saved and resumed
 * with bit-identical logits; automatic recall (turn boundaries, a fed turn, replay); loads
 * with a progress callback (a GGUF of the test data, argv[1]); and every error path reports a
 * status and a message. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "channel.h"

static int failures = 0;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      failures++;                                                              \
    }                                                                          \
  } while (0)

#define CHECK_OK(call)                                                         \
  do {                                                                         \
    channel_status st_ = (call);                                               \
    if (st_ != CHANNEL_OK) {                                                   \
      fprintf(stderr, "%s:%d: %s failed: %s: %s\n", __FILE__, __LINE__, #call, \
              channel_status_name(st_), channel_last_error());                 \
      failures++;                                                              \
    }                                                                          \
  } while (0)

/* The call must fail with `want` and leave a non-empty message containing `needle`. */
#define CHECK_ERR(want, needle, call)                                                         \
  do {                                                                                        \
    channel_status st_ = (call);                                                              \
    if (st_ != (want)) {                                                                      \
      fprintf(stderr, "%s:%d: %s returned %s, expected %s (%s)\n", __FILE__, __LINE__, #call, \
              channel_status_name(st_), channel_status_name(want), channel_last_error());     \
      failures++;                                                                             \
    } else if (channel_last_error()[0] == '\0' || !strstr(channel_last_error(), needle)) {    \
      fprintf(stderr, "%s:%d: %s: message '%s' lacks '%s'\n", __FILE__, __LINE__, #call,      \
              channel_last_error(), needle);                                                  \
      failures++;                                                                             \
    } else {                                                                                  \
      printf("ok: %s -> %s: %s\n", #call, channel_status_name(st_), channel_last_error());    \
    }                                                                                         \
  } while (0)

typedef struct {
  int count;
  int stop_after;
} Counter;

static int count_tokens(int32_t token, const char* text, size_t len, void* user) {
  Counter* c = (Counter*)user;
  (void)token;
  (void)text;
  (void)len;
  c->count++;
  return c->stop_after > 0 && c->count >= c->stop_after;
}

static channel_session_params small_params(void) {
  channel_session_params p = channel_session_default_params();
  p.n_slots = 64;
  p.n_recall = 8;
  p.probe_reserve = 4;
  p.n_threads = 1;
  p.n_batch = 16;
  return p;
}

static int recall_events = 0;
static void count_recall(const channel_recall_event* e, void* user) {
  (void)user;
  if (e->reason && e->method && e->n_hits <= 2) recall_events++;
}

/* Automatic recall: turn boundaries, a fed turn, replay, and the error paths. */
static void test_auto_recall(channel_model* m, const char* dir) {
  channel_session_params p = small_params();
  channel_session* s = NULL;
  char path[512];
  int32_t toks[10], bos = 2, turn_end = 1;
  size_t n = 0;
  int i, j;
  channel_auto_recall_params ap = channel_auto_recall_default_params();
  p.n_recall = 24;
  snprintf(path, sizeof path, "%s/capi_auto_%d.mem", dir, (int)getpid());
  remove(path);
  CHECK_OK(channel_session_create(m, &p, NULL, &s));
  if (!s) return;
  CHECK_OK(channel_session_append(s, CHANNEL_SPAN_SYSTEM, &bos, 1));
  CHECK_OK(channel_session_seal(s));
  CHECK_ERR(CHANNEL_ERR_STATE, "no memory", channel_session_set_auto_recall(s, &ap));
  CHECK_ERR(CHANNEL_ERR_STATE, "no memory", channel_session_set_recall_copy(s, 3.0f));
  CHECK_OK(channel_session_attach_memory(s, path, 64));
  CHECK_ERR(CHANNEL_ERR_ARGUMENT, "out of range", channel_session_set_recall_copy(s, -1.0f));
  CHECK_ERR(CHANNEL_ERR_ARGUMENT, "out of range", channel_session_set_recall_copy(s, NAN));
  CHECK_OK(channel_session_set_recall_copy(s, 5.0f));
  CHECK_ERR(CHANNEL_ERR_STATE, "not on", channel_session_recall_turn(s, 0));
  ap.method = (channel_recall_method)99;
  CHECK_ERR(CHANNEL_ERR_ARGUMENT, "out of range", channel_session_set_auto_recall(s, &ap));
  ap.method = CHANNEL_RECALL_PROJ; /* the random model has no retrieval head */
  CHECK_ERR(CHANNEL_ERR_ARGUMENT, "retrieval head", channel_session_set_auto_recall(s, &ap));
  ap.method = CHANNEL_RECALL_AUTO;
  ap.callback = count_recall;
  CHECK_OK(channel_session_set_auto_recall(s, &ap));
  for (i = 0; i < 30; i++) {
    for (j = 0; j < 10; j++) toks[j] = 10 + (i * 10 + j) % 200;
    CHECK_OK(channel_session_feed(s, CHANNEL_SPAN_USER, toks, 10));
    CHECK_OK(channel_session_append(s, CHANNEL_SPAN_TURN_END, &turn_end, 1));
    CHECK_OK(channel_session_recall_turn(s, i % 2));
    CHECK_OK(channel_session_recall_poll(s));
    if (i == 15) CHECK_OK(channel_session_memory_flush(s, 0));
  }
  CHECK(recall_events >= 15);
  j = recall_events;
  CHECK_OK(channel_session_feed_turn(s, toks, 5));
  CHECK(recall_events == j + 1);
  CHECK_OK(channel_session_generate(s, 5, CHANNEL_EOG_TURN_END, NULL, NULL, NULL, NULL));
  CHECK_OK(channel_session_memory_flush(s, 0));
  CHECK_OK(channel_session_replay(s, 0, &n));
  CHECK(n > 0);
  CHECK_ERR(CHANNEL_ERR_ARGUMENT, "no episode", channel_session_replay(s, 999999, &n));
  CHECK_OK(channel_session_set_auto_recall(s, NULL));
  channel_session_free(s);
  remove(path);
}

static channel_model* random_model(uint64_t seed) {
  channel_random_model_params rp;
  channel_model* m = NULL;
  memset(&rp, 0, sizeof rp);
  rp.arch = "gemma3";
  rp.seed = seed;
  CHECK_OK(channel_model_create_random(&rp, &m));
  return m;
}

static long file_size(const char* path) {
  FILE* f = fopen(path, "rb");
  long n;
  if (!f) return -1;
  fseek(f, 0, SEEK_END);
  n = ftell(f);
  fclose(f);
  return n;
}

static int copy_file(const char* from, const char* to, long truncate_to, long flip_at) {
  FILE* in = fopen(from, "rb");
  FILE* out = fopen(to, "wb");
  long i = 0;
  int c;
  if (!in || !out) return 0;
  while ((c = fgetc(in)) != EOF) {
    if (truncate_to >= 0 && i >= truncate_to) break;
    if (i == flip_at) c ^= 0x10;
    fputc(c, out);
    i++;
  }
  fclose(in);
  fclose(out);
  return 1;
}

typedef struct {
  int calls;
  float first, last;
  int fell; /* a fraction below the one before */
} LoadProgress;

static void on_load_progress(float fraction, void* user) {
  LoadProgress* p = (LoadProgress*)user;
  if (p->calls == 0) p->first = fraction;
  if (p->calls > 0 && fraction < p->last) p->fell = 1;
  p->last = fraction;
  p->calls++;
}

static void check_load_progress(const LoadProgress* p) {
  CHECK(p->calls >= 2);
  CHECK(p->first == 0.0f);
  CHECK(p->last == 1.0f);
  CHECK(!p->fell);
}

/* channel_model_load_ex and channel_model_load_memory_ex report progress from 0 to 1. */
static void test_load_progress(const char* testdata) {
  char file[1024];
  channel_model_load_params lp;
  LoadProgress progress;
  channel_model* m = NULL;
  channel_model_info info;
  long size;
  void* bytes;
  FILE* f;
  snprintf(file, sizeof file, "%s/models/llama-micro-q4_0.gguf", testdata ? testdata : ".");
  size = file_size(file);
  if (size <= 0) {
    printf("SKIPPED: no %s: the load progress checks did not run\n", file);
    return;
  }
  memset(&lp, 0, sizeof lp);
  memset(&progress, 0, sizeof progress);
  lp.progress = on_load_progress;
  lp.progress_user_data = &progress;
  CHECK_OK(channel_model_load_ex(file, &lp, &m));
  check_load_progress(&progress);
  CHECK_OK(channel_model_get_info(m, &info));
  CHECK(strcmp(info.arch, "llama") == 0);
  channel_model_free(m);
  m = NULL;

  bytes = malloc((size_t)size);
  f = fopen(file, "rb");
  CHECK(bytes && f && fread(bytes, 1, (size_t)size, f) == (size_t)size);
  if (f) fclose(f);
  memset(&progress, 0, sizeof progress);
  CHECK_OK(channel_model_load_memory_ex(bytes, (size_t)size, "micro", &lp, &m));
  check_load_progress(&progress);
  channel_model_free(m);
  m = NULL;

  /* No params, or params without a callback: a plain load. */
  CHECK_OK(channel_model_load_ex(file, NULL, &m));
  channel_model_free(m);
  m = NULL;
  lp.progress = NULL;
  CHECK_OK(channel_model_load_memory_ex(bytes, (size_t)size, NULL, &lp, &m));
  channel_model_free(m);
  free(bytes);

  /* A failed load reports its error as channel_model_load does. */
  memset(&progress, 0, sizeof progress);
  lp.progress = on_load_progress;
  CHECK_ERR(CHANNEL_ERR_IO, "no/such/model.gguf", channel_model_load_ex("no/such/model.gguf", &lp, &m));
  CHECK(progress.calls == 0);
  printf("ok: loads report progress from 0 to 1\n");
}

int main(int argc, char** argv) {
  const char* tmpdir = getenv("TMPDIR");
  char path[512], bad[600];
  channel_model *model, *other;
  channel_model_info info;
  channel_session *s = NULL, *resumed = NULL, *refused = NULL;
  channel_session_params params = small_params();
  channel_geometry g, g2;
  channel_span spans[64];
  size_t n, n_vocab, n_spans;
  int32_t tokens[256], small[2], msg_tokens[64];
  size_t n_msg = 0;
  char text[512];
  float* probe_logits;
  float *saved_next, *resumed_next;
  const float* logits;
  int64_t n_gen = 0;
  channel_stop_reason stop;
  Counter counter = {0, 0};
  int i;

  snprintf(path, sizeof path, "%s/channel_capi_test_%ld.session", tmpdir ? tmpdir : "/tmp",
           (long)getpid());

  /* Errors before anything exists. */
  CHECK_ERR(CHANNEL_ERR_IO, "no/such/model.gguf", channel_model_load("no/such/model.gguf", &model));
  CHECK_ERR(CHANNEL_ERR_ARGUMENT, "NULL", channel_model_load(NULL, &model));
  CHECK_ERR(CHANNEL_ERR_FORMAT, "gguf",
            channel_model_load_memory("not a gguf", 10, "junk", &model));

  model = random_model(1);
  other = random_model(2);
  if (!model || !other) return 1;
  saved_next = malloc(300 * sizeof(float));
  resumed_next = malloc(300 * sizeof(float));
  probe_logits = malloc(300 * sizeof(float));
  CHECK_OK(channel_model_get_info(model, &info));
  CHECK(strcmp(info.arch, "gemma3") == 0);
  CHECK(info.n_vocab == 300 && info.n_layer == 3 && info.sliding_window == 8);

  /* Tokens. */
  {
    const char* hello = "the cat sat. it was warm! and then";
    CHECK_OK(channel_tokenize(model, hello, strlen(hello), 0, 0, tokens, 256, &n));
    CHECK(n > 4);
    CHECK_ERR(CHANNEL_ERR_BUFFER, "do not fit",
              channel_tokenize(model, hello, strlen(hello), 0, 0, small, 2, &n_spans));
    CHECK(n_spans == n);
    CHECK_OK(channel_detokenize(model, tokens, n, text, sizeof text, &n_spans));
    CHECK(strcmp(text, hello) == 0);
    CHECK_ERR(CHANNEL_ERR_BUFFER, "do not fit",
              channel_detokenize(model, tokens, n, text, 3, &n_spans));
    small[0] = 5000;
    CHECK_ERR(CHANNEL_ERR_ARGUMENT, "outside the vocabulary",
              channel_detokenize(model, small, 1, text, sizeof text, &n_spans));
    /* Embeddings: unit length, the same twice, too small a buffer and a bad id refused. */
    {
      float e1[32], e2[32];
      double norm = 0.0;
      int same = 1;
      CHECK(info.n_embd == 32);
      CHECK_OK(channel_model_embed(model, tokens, n, 1, e1, 32));
      CHECK_OK(channel_model_embed(model, tokens, n, 0, e2, 32));
      for (i = 0; i < 32; ++i) {
        norm += (double)e1[i] * e1[i];
        same = same && fabsf(e1[i] - e2[i]) < 1e-5f;
      }
      CHECK(fabs(norm - 1.0) < 1e-5 && same);
      CHECK_ERR(CHANNEL_ERR_BUFFER, "does not fit",
                channel_model_embed(model, tokens, n, 1, e1, 31));
      CHECK_ERR(CHANNEL_ERR_ARGUMENT, "vocabulary",
                channel_model_embed(model, small, 1, 1, e1, 32));
      CHECK_ERR(CHANNEL_ERR_ARGUMENT, "no tokens",
                channel_model_embed(model, tokens, 0, 1, e1, 32));
      /* An embedder keeps its context: the same vector, call after call; its own errors. */
      {
        channel_embedder* em = NULL;
        float e3[32];
        CHECK_OK(channel_embedder_create(model, NULL, 64, 1, &em));
        CHECK_ERR(CHANNEL_ERR_ARGUMENT, "vocabulary", channel_embedder_embed(em, small, 1, e3, 32));
        CHECK_OK(channel_embedder_embed(em, tokens, n, e3, 32));
        CHECK_OK(channel_embedder_embed(em, tokens, n, e3, 32));
        same = 1;
        for (i = 0; i < 32; ++i) same = same && fabsf(e1[i] - e3[i]) < 1e-5f;
        CHECK(same);
        CHECK_ERR(CHANNEL_ERR_BUFFER, "does not fit",
                  channel_embedder_embed(em, tokens, n, e3, 31));
        channel_embedder_free(em);
        CHECK_OK(channel_embedder_create(model, "cpu", 2, 0, &em));
        CHECK_ERR(CHANNEL_ERR_ARGUMENT, "context", channel_embedder_embed(em, tokens, n, e3, 32));
        channel_embedder_free(em);
        CHECK_ERR(CHANNEL_ERR_ARGUMENT, "not a device",
                  channel_embedder_create(model, "gpu", 64, 1, &em));
        CHECK_ERR(CHANNEL_ERR_ARGUMENT, "n_ctx", channel_embedder_create(model, NULL, 0, 1, &em));
        {
          const channel_status st = channel_embedder_create(model, "cuda", 64, 1, &em);
          if (st == CHANNEL_OK) {
            CHECK_OK(channel_embedder_embed(em, tokens, n, e3, 32));
            norm = 0.0;
            for (i = 0; i < 32; ++i) norm += (double)e1[i] * e3[i];
            CHECK(norm > 0.999); /* the device's vector: the CPU's to rounding */
            channel_embedder_free(em);
          } else {
            CHECK(st == CHANNEL_ERR_ARGUMENT || st == CHANNEL_ERR_UNAVAILABLE);
            printf("ok: embedder on cuda -> %s: %s\n", channel_status_name(st),
                   channel_last_error());
          }
        }
        channel_embedder_free(NULL);
      }
    }
  }

  /* A geometry that cannot hold a window, and one too small for the sliding window. */
  params.n_slots = 8;
  CHECK_ERR(CHANNEL_ERR_ARGUMENT, "slots", channel_session_create(model, &params, NULL, &s));
  params.n_slots = 16;
  params.n_recall = 0;
  CHECK_ERR(CHANNEL_ERR_ARGUMENT, "sliding window",
            channel_session_create(model, &params, NULL, &s));
  params = small_params();
  /* Devices: a bad name; the CPU by name; CUDA runs, or says in one line why it cannot (a
   * build without the backend: ARGUMENT; no driver or device, or a model it cannot run:
   * UNAVAILABLE). */
  params.device = "gpu";
  CHECK_ERR(CHANNEL_ERR_ARGUMENT, "not a device", channel_session_create(model, &params, NULL, &s));
  params.device = "cpu";
  CHECK_OK(channel_session_create(model, &params, NULL, &s));
  channel_session_free(s);
  params.device = "cuda";
  {
    const channel_status st = channel_session_create(model, &params, NULL, &s);
    if (st == CHANNEL_OK) {
      channel_session_free(s);
    } else {
      CHECK(st == CHANNEL_ERR_ARGUMENT || st == CHANNEL_ERR_UNAVAILABLE);
      CHECK(channel_last_error()[0] != '\0' && strchr(channel_last_error(), '\n') == NULL);
      printf("ok: device cuda -> %s: %s\n", channel_status_name(st), channel_last_error());
    }
  }
  params = small_params();
  {
    const char* msg = "one two. three four! five six? seven";
    CHECK_OK(channel_tokenize(model, msg, strlen(msg), 0, 0, msg_tokens, 64, &n_msg));
  }
  CHECK_OK(channel_session_create(model, &params, NULL, &s));
  if (!s) return 1;
  channel_model_free(model); /* the session keeps it alive */
  model = NULL;

  CHECK_ERR(CHANNEL_ERR_STATE, "no tokens appended", channel_session_sample(s, &small[0]));
  /* Cold boot: 5 anchors, then seal. */
  for (i = 0; i < 5; ++i) tokens[i] = 10 + i;
  CHECK_OK(channel_session_append(s, CHANNEL_SPAN_SYSTEM, tokens, 5));
  CHECK_ERR(CHANNEL_ERR_STATE, "before the anchors are sealed",
            channel_session_probe(s, CHANNEL_SPAN_THOUGHT, tokens, 1, probe_logits, 300));
  CHECK_OK(channel_session_seal(s));
  CHECK_ERR(CHANNEL_ERR_STATE, "sealed", channel_session_seal(s));

  /* Bad appends leave the state unchanged. */
  CHECK_OK(channel_session_get_geometry(s, &g));
  small[0] = 300;
  CHECK_ERR(CHANNEL_ERR_ARGUMENT, "outside the vocabulary",
            channel_session_append(s, CHANNEL_SPAN_USER, small, 1));
  CHECK_ERR(CHANNEL_ERR_ARGUMENT, "no tokens",
            channel_session_append(s, CHANNEL_SPAN_USER, tokens, 0));
  CHECK_ERR(CHANNEL_ERR_ARGUMENT, "span type",
            channel_session_append(s, (channel_span_type)42, tokens, 1));
  CHECK_OK(channel_session_get_geometry(s, &g2));
  CHECK(memcmp(&g, &g2, sizeof g) == 0);
  CHECK(g.anchors == 5 && g.sealed == 1 && g.clock == 5 && g.n_slots == 64 && g.n_recall == 8);

  /* Text fed as user spans cut at sentence ends, then generation that wraps the window. */
  {
    n = n_msg;
    CHECK_OK(channel_session_feed(s, CHANNEL_SPAN_USER, msg_tokens, n));
    CHECK_OK(channel_session_get_spans(s, spans, 64, &n_spans));
    CHECK(n_spans == 1 + 4); /* the anchor span + four sentences */
    CHECK(spans[0].anchor == 1 && spans[0].type == CHANNEL_SPAN_SYSTEM);
    CHECK(spans[1].type == CHANNEL_SPAN_USER && spans[1].start_clock == 5);
    CHECK_ERR(CHANNEL_ERR_BUFFER, "do not fit", channel_session_get_spans(s, spans, 2, &n_spans));
    CHECK(n_spans == 5);
  }
  CHECK_OK(channel_session_generate(s, 400, CHANNEL_EOG_TURN_END, count_tokens, &counter, &n_gen,
                                    &stop));
  CHECK(n_gen == 400 && counter.count == 400 && stop == CHANNEL_STOP_MAX_TOKENS);
  CHECK_OK(channel_session_get_geometry(s, &g));
  CHECK(g.clock == 5 + n + 400);
  CHECK(g.evicted_spans > 0);
  CHECK(g.max_distance < 64);
  CHECK(g.window_capacity == 64 - 8 - 5 - 4);
  CHECK(g.window_used <= g.window_capacity);
  CHECK(g.kv_bytes > 0);
  /* The sampler's settings, read and changed in place. */
  {
    channel_sampler_params sp, sp2;
    const channel_sampler_params defaults = channel_sampler_default_params();
    CHECK_OK(channel_session_get_sampler(s, &sp));
    CHECK(sp.temperature == defaults.temperature && sp.top_k == defaults.top_k &&
          sp.seed == defaults.seed && sp.repeat_last_n == defaults.repeat_last_n);
    sp.temperature = 0.0f;
    sp.repeat_last_n = 4;
    CHECK_OK(channel_session_update_sampler(s, &sp));
    CHECK_OK(channel_session_get_sampler(s, &sp2));
    CHECK(sp2.temperature == 0.0f && sp2.repeat_last_n == 4 && sp2.seed == defaults.seed);
    sp2.temperature = -1.0f;
    CHECK_ERR(CHANNEL_ERR_ARGUMENT, "temperature", channel_session_update_sampler(s, &sp2));
    CHECK_ERR(CHANNEL_ERR_ARGUMENT, "out", channel_session_get_sampler(s, NULL));
    CHECK_OK(channel_session_get_sampler(s, &sp2));
    CHECK(sp2.temperature == 0.0f); /* a refused update changes nothing */
    CHECK(defaults.presence_penalty == 0.0f && defaults.frequency_penalty == 0.0f &&
          defaults.logit_bias == NULL && defaults.n_logit_bias == 0);
    /* A +100 bias forces its token under greedy sampling; the settings read back. */
    {
      const channel_logit_bias force[2] = {{7, 100.0f}, {9, -100.0f}};
      const channel_logit_bias bad[1] = {{300, 1.0f}};
      int32_t tok = -1;
      sp2.logit_bias = force;
      sp2.n_logit_bias = 2;
      sp2.presence_penalty = 0.5f;
      sp2.frequency_penalty = -0.25f;
      CHECK_OK(channel_session_update_sampler(s, &sp2));
      CHECK_OK(channel_session_sample(s, &tok));
      CHECK(tok == 7);
      CHECK_OK(channel_session_get_sampler(s, &sp));
      CHECK(sp.n_logit_bias == 2 && sp.logit_bias != NULL && sp.logit_bias != force &&
            sp.logit_bias[0].token == 7 && sp.logit_bias[1].bias == -100.0f);
      CHECK(sp.presence_penalty == 0.5f && sp.frequency_penalty == -0.25f);
      CHECK_OK(channel_session_update_sampler(s, &sp)); /* its own settings round-trip */
      sp2.logit_bias = bad;
      sp2.n_logit_bias = 1;
      CHECK_ERR(CHANNEL_ERR_ARGUMENT, "vocabulary", channel_session_update_sampler(s, &sp2));
      sp2.logit_bias = NULL;
      CHECK_ERR(CHANNEL_ERR_ARGUMENT, "logit_bias", channel_session_update_sampler(s, &sp2));
    }
    CHECK_OK(channel_session_update_sampler(s, &defaults));
  }
  counter.count = 0;
  counter.stop_after = 3;
  CHECK_OK(
      channel_session_generate(s, 10, CHANNEL_EOG_STOP, count_tokens, &counter, &n_gen, &stop));
  CHECK(n_gen == 3 && stop == CHANNEL_STOP_CALLBACK);
  CHECK_ERR(CHANNEL_ERR_ARGUMENT, "max_tokens",
            channel_session_generate(s, -1, CHANNEL_EOG_STOP, NULL, NULL, NULL, NULL));

  /* A probe leaves logits and geometry as they were; a too-long one is refused. */
  logits = channel_session_logits(s, &n_vocab);
  CHECK(logits != NULL && n_vocab == 300);
  memcpy(saved_next, logits, n_vocab * sizeof(float));
  CHECK_OK(channel_session_get_geometry(s, &g));
  CHECK(channel_session_max_probe(s) >= 1);
  CHECK_OK(channel_session_probe(s, CHANNEL_SPAN_THOUGHT, tokens, 1, probe_logits, n_vocab));
  CHECK_ERR(CHANNEL_ERR_BUFFER, "logits buffer",
            channel_session_probe(s, CHANNEL_SPAN_THOUGHT, tokens, 1, probe_logits, 10));
  for (i = 0; i < 200; ++i) tokens[i] = i % 300;
  CHECK_ERR(CHANNEL_ERR_STATE, "free window",
            channel_session_probe(s, CHANNEL_SPAN_THOUGHT, tokens, 200, probe_logits, n_vocab));
  CHECK(memcmp(channel_session_logits(s, NULL), saved_next, n_vocab * sizeof(float)) == 0);
  CHECK_OK(channel_session_get_geometry(s, &g2));
  CHECK(memcmp(&g, &g2, sizeof g) == 0);

  /* Save, continue 50 tokens; resume from the file and continue the same 50 tokens. */
  CHECK_OK(channel_session_save(s, path));
  CHECK(file_size(path) > 1000);
  CHECK_OK(channel_session_generate(s, 50, CHANNEL_EOG_TURN_END, NULL, NULL, &n_gen, NULL));
  memcpy(saved_next, channel_session_logits(s, NULL), n_vocab * sizeof(float));
  CHECK_OK(channel_session_get_geometry(s, &g));

  CHECK_ERR(CHANNEL_ERR_FORMAT, "another model",
            channel_session_load(other, path, &params, &refused));
  {
    channel_model* again = random_model(1);
    channel_session_params wrong = params;
    wrong.n_slots = 65;
    CHECK_ERR(CHANNEL_ERR_FORMAT, "another geometry",
              channel_session_load(again, path, &wrong, &refused));
    CHECK_ERR(CHANNEL_ERR_IO, "cannot open",
              channel_session_load(again, "no/such/session", &params, &refused));
    snprintf(bad, sizeof bad, "%s.corrupt", path);
    CHECK(copy_file(path, bad, -1, file_size(path) / 2));
    CHECK_ERR(CHANNEL_ERR_FORMAT, "checksum", channel_session_load(again, bad, &params, &refused));
    CHECK(copy_file(path, bad, file_size(path) - 100, -1));
    CHECK_ERR(CHANNEL_ERR_FORMAT, "truncated", channel_session_load(again, bad, &params, &refused));
    remove(bad);
    CHECK(refused == NULL);

    CHECK_OK(channel_session_load(again, path, &params, &resumed));
    channel_model_free(again);
  }
  if (resumed) {
    CHECK_OK(channel_session_generate(resumed, 50, CHANNEL_EOG_TURN_END, NULL, NULL, &n_gen, NULL));
    memcpy(resumed_next, channel_session_logits(resumed, NULL), n_vocab * sizeof(float));
    CHECK(memcmp(saved_next, resumed_next, n_vocab * sizeof(float)) == 0);
    CHECK_OK(channel_session_get_geometry(resumed, &g2));
    CHECK(memcmp(&g, &g2, sizeof g) == 0);
    snprintf(bad, sizeof bad, "%s/no/such/dir/x.session", tmpdir ? tmpdir : "/tmp");
    CHECK_ERR(CHANNEL_ERR_IO, "cannot create", channel_session_save(resumed, bad));
  }
  remove(path);
  CHECK(!isnan(saved_next[0]));

  free(saved_next);
  free(resumed_next);
  free(probe_logits);
  test_load_progress(argc > 1 ? argv[1] : NULL);
  {
    channel_model* am = random_model(1);
    if (am) test_auto_recall(am, tmpdir ? tmpdir : "/tmp");
    channel_model_free(am);
  }
  channel_session_free(s);
  channel_session_free(resumed);
  channel_model_free(other);
  channel_model_free(NULL);
  channel_session_free(NULL);
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("all checks passed\n");
  return 0;
}
