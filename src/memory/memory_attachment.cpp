// MemoryAttachment: eviction hook -> staging -> background consolidation, and recall into
// the recall tier of a RingSession.
#include "memory/memory_attachment.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "backend/cpu/thread_pool.h"
#include "gguf/model_signature.h"
#include "model/model.h"
#include "util/error.h"

namespace channel {

std::vector<int> recall_layers(const ModelHparams& hp) {
  std::vector<int> out;
  for (int il = 0; il < hp.n_layer; ++il)
    if (!hp.is_sliding(il) && !hp.is_bounded(il)) out.push_back(il);
  return out;
}

StoreGeometry session_store_geometry(const Model& model, uint32_t max_episodes,
                                     uint32_t max_tokens, uint32_t keys_per_head) {
  const ModelHparams& hp = model.hparams();
  StoreGeometry g;
  g.num_layers = static_cast<uint32_t>(recall_layers(hp).size());
  if (g.num_layers == 0)
    throw Error(
        "episodic: the model has no global layer (every layer is sliding-window or bounded), so "
        "nothing it holds can be stored or recalled");
  g.hidden_size = static_cast<uint32_t>(hp.n_embd);
  g.kv_dim = static_cast<uint32_t>(hp.n_head_kv * hp.head_dim);
  g.max_episodes = max_episodes;
  g.max_tokens = max_tokens;
  g.ext_kinds = kRetrievalKeys;
  g.head_dim = static_cast<uint32_t>(hp.head_dim);
  g.keys_per_head = keys_per_head;
  g.lexical = true;  // version 3: the lexical index of recall is kept in the file
  if (auto head = load_retrieval_head(model.gguf(), static_cast<size_t>(hp.n_embd))) {
    g.ext_kinds |= kRetrievalProj;
    g.proj_dim = head->dim;
  }
  return g;
}

EpisodicStore open_or_create_store(const std::string& path, const Model& model,
                                   uint32_t max_episodes, uint32_t max_tokens, bool* created) {
  const uint64_t hash = model_id_hash(model.gguf());
  const StoreGeometry g = session_store_geometry(model, max_episodes, max_tokens);
  std::error_code ec;
  const bool exists = std::filesystem::exists(path, ec);
  if (created) *created = !exists;
  if (!exists) return EpisodicStore::create(path, g, hash);
  StoreOptions o;
  o.model_hash = hash;
  EpisodicStore s = EpisodicStore::open(path, o);
  const StoreLayout& L = s.layout();
  if (L.num_layers != g.num_layers || L.hidden_size != g.hidden_size || L.kv_dim != g.kv_dim)
    throw_error(
        "episodic: {}: the store holds {} layers x kv_dim {} (hidden {}), a session of this model "
        "writes {} global layers x kv_dim {} (hidden {})",
        path, L.num_layers, L.kv_dim, L.hidden_size, g.num_layers, g.kv_dim, g.hidden_size);
  return s;
}

MemoryAttachment::MemoryAttachment(RingSession& session, EpisodicStore& store, MemoryConfig config)
    : session_(session), store_(store), config_(std::move(config)) {
  const ModelHparams& hp = session.model().hparams();
  n_embd_ = static_cast<size_t>(hp.n_embd);
  head_dim_ = static_cast<size_t>(hp.head_dim);
  n_kv_heads_ = static_cast<size_t>(hp.n_head_kv);
  kv_dim_ = head_dim_ * n_kv_heads_;
  const size_t n_global = session.global_layers().size();
  const StoreLayout& L = store.layout();
  if (L.num_layers != n_global || L.hidden_size != n_embd_ || L.kv_dim != kv_dim_)
    throw_error(
        "episodic: {}: the store holds {} layers x kv_dim {} (hidden {}), the session has {} "
        "global layers x kv_dim {} (hidden {})",
        store.path(), L.num_layers, L.kv_dim, L.hidden_size, n_global, kv_dim_, n_embd_);
  if (config_.consolidate && config_.staging.capacity > L.max_tokens)
    throw_error("episodic: {}: episodes of {} tokens do not fit the store's {} tokens per episode",
                store.path(), config_.staging.capacity, L.max_tokens);
  const RopeFreqs& rf = session.rope_global();
  RotaryDims r;
  r.style = rf.style;
  r.head_dim = static_cast<uint32_t>(head_dim_);
  r.n_heads = static_cast<uint32_t>(n_kv_heads_);
  r.n_rot = rf.n_rot;
  r.inv_freq = rf.inv_freq;  // the very angles the session rotated the keys with
  rope_.push_back(std::move(r));
  rope_table_.emplace_back(rope_[0]);
  if (config_.query_threads > 1) pool_ = std::make_unique<ThreadPool>(config_.query_threads);
  attn_scale_ = hp.attn_scale;
  group_ = static_cast<uint32_t>(hp.n_head / hp.n_head_kv);
  if (auto head = load_retrieval_head(session.model().gguf(), n_embd_))
    head_ = std::make_shared<const RetrievalHead>(std::move(*head));
  if (L.has_proj() && (!head_ || head_->dim != L.proj_dim))
    throw_error(
        "episodic: {}: the store keeps retrieval vectors of dim {} but this model has {}",
        store.path(), L.proj_dim,
        head_ ? fmt::format("a retrieval head of dim {}", head_->dim) : "no retrieval head");
  if (L.has_keys() && (L.head_dim != head_dim_ || L.key_heads != n_kv_heads_))
    throw_error("episodic: {}: the store keeps keys of {} heads x {}, the model has {} x {}",
                store.path(), L.key_heads, L.head_dim, n_kv_heads_, head_dim_);
  // Queries are captured whenever the store keeps keys: episodes choose their keys by them,
  // and recall by keys scores with them. Otherwise decoding copies nothing.
  if (L.has_keys()) {
    q_row_ = n_global * session.query_dim();
    session.set_query_capture(true);
  }

  const uint32_t n_slots = session.ring().config().n_slots;
  slot_token_.assign(n_slots, 0);
  slot_hidden_.assign(size_t{n_slots} * n_embd_, 0.0f);
  if (q_row_ > 0 && config_.consolidate) slot_queries_.assign(size_t{n_slots} * q_row_, 0.0f);
  kv_rows_.assign(n_global * 2 * kv_dim_, 0.0f);
  for (size_t g = 0; g < n_global; ++g) {
    k_ptrs_.push_back(kv_rows_.data() + (2 * g) * kv_dim_);
    v_ptrs_.push_back(kv_rows_.data() + (2 * g + 1) * kv_dim_);
  }
  if (config_.consolidate) {
    WorkerConfig wc;
    wc.queue_capacity = config_.queue_capacity;
    wc.summarize = config_.summarize;
    if (L.ext_kinds) {
      auto fc = std::make_shared<RetrievalFeatureConfig>();
      fc->kinds = L.ext_kinds;
      fc->num_layers = L.num_layers;
      fc->n_kv_heads = static_cast<uint32_t>(n_kv_heads_);
      fc->group = group_;
      fc->head_dim = static_cast<uint32_t>(head_dim_);
      fc->keys_per_head = L.keys_per_head;
      fc->attn_scale = attn_scale_;
      fc->rope = session.rope_global();
      fc->head = head_;
      wc.features = std::move(fc);
    }
    const auto eps = store.list();  // lineage continues from the newest stored episode
    if (!eps.empty()) wc.first_parent = eps.back().episode_id;
    worker_ = std::make_unique<ConsolidationWorker>(store, std::move(wc));
    staging_ = std::make_unique<StagingBuffer>(
        config_.staging,
        StagingDims{static_cast<uint32_t>(n_global), static_cast<uint32_t>(n_embd_),
                    static_cast<uint32_t>(kv_dim_),
                    static_cast<uint32_t>(q_row_ > 0 ? session.query_dim() : 0)},
        [this](StagedEpisode&& e) {
          if (config_.on_episode) config_.on_episode(e);
          worker_->submit(std::move(e));
        });
    session.set_eviction_hook([this](const EvictionEvent& ev) { on_evict(ev); });
  }
  session.set_token_tap([this](const TokenBatch& b) { on_tokens(b); });
}

MemoryAttachment::~MemoryAttachment() {
  session_.set_token_tap(nullptr);
  if (q_row_ > 0) session_.set_query_capture(false);
  if (config_.consolidate) session_.set_eviction_hook(nullptr);
  try {
    flush();
  } catch (...) {  // the worker counts its failures; a destructor must not throw
  }
  // The store outlives the attachment, the device's page locks of its mapping do not.
  if (stored_region_) session_.forget_host_region(stored_region_);
}

void MemoryAttachment::on_tokens(const TokenBatch& b) {
  const bool have_q = q_row_ > 0 && b.queries.size() == b.tokens.size() * q_row_;
  if (b.transient) {  // probe tokens are rolled back, never evicted
    if (capture_) {
      captured_.insert(captured_.end(), b.hidden.begin(), b.hidden.end());
      if (have_q)
        captured_q_.assign(b.queries.end() - static_cast<std::ptrdiff_t>(q_row_), b.queries.end());
    }
    return;
  }
  if (recent_.size() != kCueTokens) recent_.assign(kCueTokens, 0);
  for (int32_t tok : b.tokens) recent_[recent_n_++ % kCueTokens] = tok;
  for (size_t t = 0; t < b.tokens.size(); ++t) {
    const uint32_t slot = b.slots[t];
    slot_token_[slot] = b.tokens[t];
    std::memcpy(slot_hidden_.data() + size_t{slot} * n_embd_, b.hidden.data() + t * n_embd_,
                n_embd_ * sizeof(float));
    if (have_q && !slot_queries_.empty())
      std::memcpy(slot_queries_.data() + size_t{slot} * q_row_, b.queries.data() + t * q_row_,
                  q_row_ * sizeof(float));
  }
  last_hidden_.assign(b.hidden.end() - static_cast<std::ptrdiff_t>(n_embd_), b.hidden.end());
  if (have_q)
    last_queries_.assign(b.queries.end() - static_cast<std::ptrdiff_t>(q_row_), b.queries.end());
  if (observer_) observer_(b);
}

// Runs inside SlotRing::append_token, before any of these slots is written again.
void MemoryAttachment::on_evict(const EvictionEvent& ev) {
  const auto globals = session_.global_layers();
  const SpanType type = ev.span.span_type;
  const bool tool = type == SpanType::tool_call || type == SpanType::tool_result;
  const uint64_t now = now_ms();
  const size_t n = ev.slots.size();
  if (session_.on_device()) {  // the K/V lives on the device: the span's rows in one read each
    span_kv_.resize(globals.size() * 2 * n * kv_dim_);
    for (size_t g = 0; g < globals.size(); ++g)
      session_.kv_slots(globals[g], ev.slots, span_kv_.data() + (2 * g) * n * kv_dim_,
                        span_kv_.data() + (2 * g + 1) * n * kv_dim_);
  }
  for (size_t i = 0; i < n; ++i) {
    const uint32_t slot = ev.slots[i];
    for (size_t g = 0; g < globals.size(); ++g) {
      if (session_.on_device()) {  // token i's rows of the span read above
        for (size_t kv = 0; kv < 2; ++kv)
          std::memcpy(kv_rows_.data() + (2 * g + kv) * kv_dim_,
                      span_kv_.data() + ((2 * g + kv) * n + i) * kv_dim_, kv_dim_ * sizeof(float));
        continue;
      }
      const auto k = session_.layer_k(globals[g]);
      const auto v = session_.layer_v(globals[g]);
      const size_t n_slots = session_.layer_slots(globals[g]);
      for (size_t h = 0; h < n_kv_heads_; ++h) {  // [h][slot][hd] -> [h][hd]
        const size_t src = (h * n_slots + slot) * head_dim_;
        std::memcpy(kv_rows_.data() + (2 * g) * kv_dim_ + h * head_dim_, k.data() + src,
                    head_dim_ * sizeof(float));
        std::memcpy(kv_rows_.data() + (2 * g + 1) * kv_dim_ + h * head_dim_, v.data() + src,
                    head_dim_ * sizeof(float));
      }
    }
    const bool last = i + 1 == ev.slots.size();
    StagedToken t;
    t.token = slot_token_[slot];
    t.clock = ev.span.start_clock + i;
    t.slot = slot;
    t.hidden = std::span<const float>(slot_hidden_.data() + size_t{slot} * n_embd_, n_embd_);
    if (!slot_queries_.empty())
      t.queries = std::span<const float>(slot_queries_.data() + size_t{slot} * q_row_, q_row_);
    t.span_end = last && !ev.cut;
    t.turn_end = last && !ev.cut && type == SpanType::turn_end;
    t.tool = tool;
    staging_->push(t, k_ptrs_, v_ptrs_, now);
    ++tokens_staged_;
  }
}

std::vector<float> MemoryAttachment::encode_in_context(std::span<const int32_t> tokens) {
  captured_.clear();
  capture_ = true;
  try {
    session_.probe(tokens, SpanType::user);
  } catch (...) {
    capture_ = false;
    throw;
  }
  capture_ = false;
  return centroid_of(captured_, n_embd_);
}

std::vector<int32_t> MemoryAttachment::recent_tokens() const {
  const uint64_t n = std::min<uint64_t>(recent_n_, kCueTokens);
  std::vector<int32_t> out;
  out.reserve(n);
  for (uint64_t i = recent_n_ - n; i < recent_n_; ++i) out.push_back(recent_[i % kCueTokens]);
  return out;
}

CueState MemoryAttachment::probe_cue(std::span<const int32_t> tokens) {
  captured_.clear();
  captured_q_.clear();
  capture_ = true;
  try {
    session_.probe(tokens, SpanType::user);
  } catch (...) {
    capture_ = false;
    throw;
  }
  capture_ = false;
  CueState c;
  if (captured_.size() >= n_embd_)
    c.hidden.assign(captured_.end() - static_cast<std::ptrdiff_t>(n_embd_), captured_.end());
  c.queries = std::move(captured_q_);
  c.tokens = recent_tokens();
  c.tokens.insert(c.tokens.end(), tokens.begin(), tokens.end());
  if (c.tokens.size() > kCueTokens)
    c.tokens.erase(c.tokens.begin(), c.tokens.end() - static_cast<std::ptrdiff_t>(kCueTokens));
  return c;
}

RecallMethod resolve_recall_method(RecallMethod m, const StoreLayout& L, bool model_has_head,
                                   const std::string& path) {
  switch (m) {
    case RecallMethod::automatic:
      return model_has_head && L.has_proj() ? RecallMethod::proj
             : L.has_keys()                 ? RecallMethod::keys
                                            : RecallMethod::centroid;
    case RecallMethod::keys:
    case RecallMethod::hybrid:
      if (!L.has_keys())
        throw_error("episodic: {}: recall by {}: the store keeps no representative keys (a "
                    "version {} store)",
                    path, recall_method_name(m), L.version);
      return m;
    case RecallMethod::proj:
      if (!L.has_proj() || !model_has_head)
        throw_error("episodic: {}: recall by proj: {}", path,
                    model_has_head ? "the store keeps no retrieval vectors"
                                   : "the model has no retrieval head (channel.retrieval.*)");
      return m;
    case RecallMethod::centroid:
      return m;
  }
  return RecallMethod::centroid;
}

RecallMethod MemoryAttachment::resolve(RecallMethod m) const {
  return resolve_recall_method(m, store_.layout(), head_ != nullptr, store_.path());
}

std::vector<RecallHit> MemoryAttachment::query_state(const CueState& cue, RecallMethod m,
                                                     size_t k, bool use_pool,
                                                     float lexical) const {
  ThreadPool* pool = use_pool ? pool_.get() : nullptr;
  m = resolve(m);
  if (cue.hidden.size() != n_embd_) return {};
  const std::vector<float>& centroid = cue.centroid.empty() ? cue.hidden : cue.centroid;
  if (m == RecallMethod::centroid) return store_.query(centroid, k, pool);
  RetrievalCue rc;
  rc.method = m;
  rc.centroid = centroid;
  rc.queries = cue.queries;
  rc.group = group_;
  rc.scale = attn_scale_;
  rc.tokens = cue.tokens;
  rc.lexical = lexical;
  std::vector<float> proj;
  if (m == RecallMethod::proj) {
    proj.resize(head_->dim);
    head_->project_query(cue.hidden.data(), proj.data());
    rc.proj = proj;
  }
  if ((m == RecallMethod::keys || m == RecallMethod::hybrid) && cue.queries.empty()) return {};
  return store_.query_retrieval(rc, k, pool);
}

void MemoryAttachment::cut(CutReason reason) {
  if (staging_) staging_->flush(reason);
}

void MemoryAttachment::consolidate_window() {
  if (!staging_) return;
  const SlotRing& ring = session_.ring();
  if (ring.sealed()) {
    for (size_t i = 0; i < ring.window_span_count(); ++i) {
      const SemanticSpan& sp = ring.window_span(i);
      on_evict(EvictionEvent{sp, ring.window_slots(sp.start_clock, sp.end_clock), false});
    }
  }
  flush();
}

void MemoryAttachment::flush() {
  if (!staging_) return;
  staging_->flush(CutReason::flush);
  worker_->drain();
}

std::vector<RecallHit> MemoryAttachment::query(std::span<const float> q, size_t k) const {
  return store_.query(q, k, pool_.get());
}

RecallResult MemoryAttachment::recall(uint64_t id, float score) {
  const auto header = store_.find(id);
  if (!header) throw_error("episodic: {}: no episode {} to recall", store_.path(), id);
  const uint32_t n = header->token_count;
  // A tentative decode is settled first, before the store's lock is taken below: settling can
  // evict, and an eviction can wait for the writer, which needs that lock to append.
  session_.truncate_last(0);
  const SlotRing& ring = session_.ring();
  const uint32_t n_recall = ring.config().n_recall;
  if (n > n_recall)
    throw_error("episodic: episode {} has {} tokens; the recall tier holds {}", id, n, n_recall);
  RecallResult r;
  r.episode_id = id;
  r.score = score;
  r.n_tokens = n;
  for (const RecallEpisode& e : ring.recall_episodes()) {
    if (e.id != id) continue;
    r.already_active = true;
    r.slot_begin = e.slot_begin;
    r.stored_pos = e.stored_pos;
    recalled_at_[id] = ++tick_;
    ++recalls_;
    store_.record_access(id, now_ms());
    return r;
  }
  // Least recently recalled first; episodes this attachment did not place count as oldest.
  while (ring.recall_free_run() < n) {
    const auto& eps = ring.recall_episodes();
    const auto lru = std::min_element(eps.begin(), eps.end(), [&](const auto& a, const auto& b) {
      const auto ia = recalled_at_.find(a.id), ib = recalled_at_.find(b.id);
      return (ia == recalled_at_.end() ? 0 : ia->second) <
             (ib == recalled_at_.end() ? 0 : ib->second);
    });
    const uint64_t victim = lru->id;
    session_.release_recall(victim);
    recalled_at_.erase(victim);
    r.released.push_back(victim);
    ++recall_evictions_;
  }
  // The new episode comes last in activation order: its first token sits at virtual position
  // anchors + (recall tokens already active) (kv/virtual_positions.h). Its keys are rotated
  // there, so that at activation the query-side offset of its run is zero.
  r.stored_pos = uint64_t{ring.n_sys()} + ring.recall_used();
  const double delta = static_cast<double>(r.stored_pos) - static_cast<double>(header->start_clock);
  // Straight from the store's mapping into the recall slots: one pass per row, no staging
  // copy. A damaged record throws from inside and the session deactivates the episode.
  RehydrateOptions ro;
  ro.tables = rope_table_;
  ro.pool = pool_.get();
  // On a device the rows go there as stored and the device turns the keys by delta: straight
  // from the store's pages where the device takes them from there (it page-locks them once,
  // then copies and checks them itself), otherwise read on the pool into its staging.
  const bool device = session_.on_device();
  bool placed = false;
  if (device)
    store_.with_stored_kv(id, [&](const StoredKvF16& source) {
      stored_region_ = source.region;
      if (auto first = session_.inject_recall_stored(id, r.stored_pos, source, delta)) {
        r.slot_begin = *first;
        placed = true;
      }
    });
  if (!placed)
    r.slot_begin = session_.inject_recall(
        id, n, r.stored_pos,
        [&](const KvRowsF16& out) { store_.rehydrate(id, rope_, device ? 0.0 : delta, out, ro); },
        device ? delta : 0.0);
  recalled_at_[id] = ++tick_;
  ++recalls_;
  store_.record_access(id, now_ms());
  return r;
}

std::vector<RecallResult> MemoryAttachment::recall_top(std::span<const float> q, size_t k) {
  const std::vector<RecallHit> hits = query(q, k);
  std::vector<RecallResult> out;
  for (auto it = hits.rbegin(); it != hits.rend(); ++it)
    out.push_back(recall(it->episode_id, it->score));
  std::reverse(out.begin(), out.end());
  return out;
}

void MemoryAttachment::release_all() {
  std::vector<uint64_t> ids;
  for (const RecallEpisode& e : session_.ring().recall_episodes()) ids.push_back(e.id);
  for (uint64_t id : ids) {
    session_.release_recall(id);
    recalled_at_.erase(id);
  }
}

void MemoryAttachment::release(uint64_t id) {
  for (const RecallEpisode& e : session_.ring().recall_episodes())
    if (e.id == id) {
      session_.release_recall(id);
      recalled_at_.erase(id);
      return;
    }
}

size_t MemoryAttachment::bias_toward_recalled(std::span<float> logits) {
  std::vector<LogitEdit> edits;
  const size_t best = recalled_bonus(logits.size(), edits);
  for (const LogitEdit& e : edits) logits[static_cast<size_t>(e.id)] += e.delta;
  return best;
}

size_t MemoryAttachment::recalled_bonus(size_t n_vocab, std::vector<LogitEdit>& edits) {
  if (config_.copy.bias == 0.0f) return 0;
  const auto& eps = session_.ring().recall_episodes();
  if (eps.empty()) return 0;
  // The token ids of what tier 3 holds, read once per episode while it stays there.
  std::erase_if(tier3_tokens_, [&](const auto& kv) {
    return std::none_of(eps.begin(), eps.end(), [&](const RecallEpisode& e) { return e.id == kv.first; });
  });
  std::vector<std::span<const int32_t>> sources;
  for (const RecallEpisode& e : eps) {
    auto it = tier3_tokens_.find(e.id);
    if (it == tier3_tokens_.end()) {
      std::vector<int32_t> tokens;
      try {
        tokens = store_.read_tokens(e.id);
      } catch (const Error&) {
        // unreadable (removed, replaced): no evidence from it; the recall itself reported it
      }
      it = tier3_tokens_.emplace(e.id, std::move(tokens)).first;
    }
    sources.emplace_back(it->second);
  }
  copy_context_ = recent_tokens();
  return recall_copy_edits(n_vocab, copy_context_, sources, config_.copy, edits);
}

MemoryStats MemoryAttachment::stats() const {
  MemoryStats s;
  s.tokens_staged = tokens_staged_;
  s.episodes_cut = staging_ ? staging_->episodes_cut() : 0;
  if (worker_) s.worker = worker_->stats();
  s.recalls = recalls_;
  s.recall_evictions = recall_evictions_;
  return s;
}

}  // namespace channel
