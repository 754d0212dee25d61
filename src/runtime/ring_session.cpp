// RingSession: the KV slot geometry behind forward()'s LayerAttention.
#include "runtime/ring_session.h"
#include "runtime/session_memory.h"

#include <algorithm>
#include <cstring>

#include "backend/cpu/layer_kernels.h"
#include "ops/fp16.h"
#include "util/error.h"

namespace channel {

// Stores each token's K (rotated at its clock, f64 angles) and V into its layer's slot, and
// attends through the runs of the query (kv/slot_attention.h).
class RingSession::Backend final : public PerHeadAttention {
 public:
  explicit Backend(RingSession& s) : PerHeadAttention(s.model_->hparams()), s_(s) {}

 protected:

  void store(int il, int t, const float* k, const float* v) override {
    const ModelHparams& hp = s_.model_->hparams();
    Layer& L = s_.layers_[il];
    const uint32_t slot = L.sliding ? s_.local_slots_[t] : s_.global_slots_[t];
    const RopeFreqs& rope = L.sliding ? s_.rope_sliding_ : s_.rope_global_;
    const float* cs = (L.sliding ? s_.cs_sliding_ : s_.cs_global_).data() + size_t(t) * rope.n_rot;
    const size_t hd = hp.head_dim;
    for (int h = 0; h < hp.n_head_kv; ++h) {
      float* kd = L.k.data() + (size_t(h) * L.n_slots + slot) * hd;
      rope_rotate(rope, cs, k + h * hd, kd, 1, static_cast<uint32_t>(hd));
      std::memcpy(L.v.data() + (size_t(h) * L.n_slots + slot) * hd, v + h * hd, hd * sizeof(float));
    }
  }

  void attend_head(int il, int t, int hk, const float* q, float* out, int thread) override {
    const ModelHparams& hp = s_.model_->hparams();
    const Layer& L = s_.layers_[il];
    const auto group = static_cast<uint32_t>(hp.n_head / hp.n_head_kv);
    const auto hd = static_cast<uint32_t>(hp.head_dim);
    const SlotAttnShape shape{group, 1, hd, L.n_slots};  // one KV head of the arena
    const size_t head = size_t(hk) * L.n_slots * hd;
    const std::span<const SlotRun> runs =
        L.sliding ? std::span<const SlotRun>(&s_.local_runs_[t], 1) : s_.runs_[t];
    if (s_.capture_q_ && s_.global_index_[il] >= 0) {  // the tap gets the global layers' queries
      const size_t qd = size_t(hp.n_head) * hd;
      float* dst = s_.queries_.data() +
                   (size_t(t) * s_.global_layers_.size() + size_t(s_.global_index_[il])) * qd +
                   size_t(hk) * group * hd;
      std::memcpy(dst, q, size_t(group) * hd * sizeof(float));
    }
    RecallRowsF16 recall;  // global layers: slots from L.n_slots on are the f16 recall tier
    if (!L.rk.empty()) {
      recall = {L.rk.data() + size_t(hk) * hd, L.rv.data() + size_t(hk) * hd, L.n_slots,
                s_.config_.ring.n_recall, size_t(hp.n_head_kv) * hd};
    }
    slot_attention(shape, L.sliding ? s_.rope_sliding_ : s_.rope_global_, q, L.k.data() + head,
                   L.v.data() + head, runs, hp.attn_scale, out, s_.attn_scratch_[thread], recall);
  }

  // Where a later token of the chunk writes a slot that query a still sees (run_chunk).
  int segment_end(int a, int n) override { return std::min(s_.segment_end_[a], n); }

 private:
  RingSession& s_;
};

RingSession::RingSession(std::shared_ptr<const Model> model, const RingSessionConfig& config)
    : SessionBase(model, model->hparams().n_vocab, config.n_threads),
      config_(config),
      // A geometry larger than the machine is refused before anything is allocated.
      ring_((check_session_fits_memory(model_->hparams(), config), config.ring)),
      bounded_(*model_),
      scratch_(model_->hparams(), std::max(1, config.n_batch)) {
  const ModelHparams& hp = model_->hparams();
  if (config.n_batch < 1)
    throw_error("session: n_batch must be at least 1, got {}", config.n_batch);
  if (hp.head_dim != hp.head_dim_v)
    throw_error("session: the KV slot geometry needs equal K and V head dims ({} vs {})",
                hp.head_dim, hp.head_dim_v);
  const float* factors =
      model_->weights().rope_freqs.empty() ? nullptr : model_->weights().rope_freqs.data();
  rope_global_ = RopeFreqs::make(hp.rope_style, static_cast<uint32_t>(hp.n_rot),
                                 hp.rope_base, hp.rope_freq_scale, factors);
  rope_sliding_ = RopeFreqs::make(hp.rope_style, static_cast<uint32_t>(hp.n_rot),
                                  hp.rope_base_swa, 1.0, factors);
  if (hp.sliding_window > 0) {
    // Spare slots beyond W: a chunk of n tokens writes all its K/V before its first query
    // reads, and a probe must not overwrite what the next real query needs.
    const uint32_t spare =
        std::max<uint32_t>(config.ring.probe_reserve, static_cast<uint32_t>(config.n_batch - 1));
    local_ = std::make_unique<LocalRing>(static_cast<uint32_t>(hp.sliding_window), spare);
    if (local_->n_slots() > config.ring.n_slots)
      throw_error("session: {} slots cannot hold the sliding window of {} (+{} spare slots)",
                  config.ring.n_slots, hp.sliding_window, spare);
  }
  layers_.resize(hp.n_layer);
  for (int il = 0; il < hp.n_layer; ++il) {
    Layer& L = layers_[il];
    L.sliding = hp.is_sliding(il);
    const bool global = !L.sliding && !hp.is_bounded(il);
    L.n_slots = hp.is_bounded(il) ? 0
                : L.sliding       ? local_->n_slots()
                                  : config.ring.n_slots - config.ring.n_recall;
    if (global) global_layers_.push_back(il);
    if (config.compute) continue;  // the device holds the K/V
    L.k.assign(size_t(hp.n_head_kv) * L.n_slots * hp.head_dim, 0.0f);
    L.v.assign(L.k.size(), 0.0f);
    if (global) {
      L.rk.assign(size_t(config.ring.n_recall) * hp.n_head_kv * hp.head_dim, 0);
      L.rv.assign(L.rk.size(), 0);
    }
  }
  global_index_.assign(hp.n_layer, -1);
  for (size_t g = 0; g < global_layers_.size(); ++g) global_index_[global_layers_[g]] = int(g);
  const auto nb = static_cast<size_t>(config.n_batch);
  clocks_.resize(nb);
  global_slots_.resize(nb);
  local_slots_.resize(nb);
  runs_.resize(nb);
  for (auto& r : runs_) r.reserve(config.ring.n_recall + 2);
  local_runs_.resize(nb);
  cs_global_.resize(nb * hp.n_rot);
  cs_sliding_.resize(nb * hp.n_rot);
  attn_scratch_.resize(pool_.size());
  distances_.resize(nb);
  segment_end_.resize(nb);
  oldest_.resize(nb);
  saved_logits_.resize(hp.n_vocab);
  tentative_distances_.resize(config.ring.probe_reserve);
  tentative_tokens_.resize(config.ring.probe_reserve);
  tentative_starts_.resize(config.ring.probe_reserve);
  tentative_clocks_.resize(config.ring.probe_reserve);
  tentative_slots_.resize(config.ring.probe_reserve);
  saved_ring_ = SlotRing(config.ring);
  backend_ = std::make_unique<Backend>(*this);
  if (config.compute) {
    RingComputeShape shape;
    for (int il = 0; il < hp.n_layer; ++il)
      shape.layer_slots.push_back(hp.is_bounded(il)     ? 0
                                  : layers_[il].sliding ? layers_[il].n_slots
                                                        : config.ring.n_slots);
    shape.recall_begin = recall_begin();
    shape.n_batch = config.n_batch;
    shape.max_runs = config.ring.n_recall + 2;
    // The runs point into the ring's slot lists (identity, window ring) and the LocalRing's.
    shape.table_slots = 3 * config.ring.n_slots + (local_ ? 2 * local_->n_slots() : 0);
    shape.rope_global = rope_global_;
    shape.rope_sliding = rope_sliding_;
    compute_ = config.compute(model_, shape);
    if (float* row = compute_->logits_memory()) use_logits_memory(row);
    residual_.resize(nb * hp.n_embd);
    for (int il = 0; il < hp.n_layer; ++il)
      if (hp.is_bounded(il)) bounded_layers_.push_back(il);
    bounded_kv_.resize(bounded_layers_.size() * nb * 2 * hp.n_head_kv * hp.head_dim);
  }
  layer_attention_ = layer_attention(hp, bounded_, *backend_);
  // The ring calls the session's hook, which a tentative decode_all holds back.
  ring_.set_eviction_hook([this](const EvictionEvent& e) {
    if (hook_live_ && hook_) hook_(e);
  });
}

void RingSession::set_eviction_hook(EvictionHook hook) {
  settle(0);
  hook_ = std::move(hook);
}

RingSession::~RingSession() = default;

size_t RingSession::kv_bytes() const {
  size_t n = compute_ ? compute_->kv_bytes() : 0;
  for (const Layer& L : layers_)
    n += (L.k.size() + L.v.size()) * sizeof(float) + (L.rk.size() + L.rv.size()) * sizeof(uint16_t);
  return n + bounded_.bytes();
}

size_t RingSession::recall_row_at(int il, uint32_t slot, int h) const {
  const ModelHparams& hp = model_->hparams();
  const Layer& L = layers_.at(static_cast<size_t>(il));
  if (h < 0 || h >= hp.n_head_kv || slot < L.n_slots ||
      slot - L.n_slots >= L.rk.size() / (size_t(hp.n_head_kv) * hp.head_dim))
    throw_error("session: layer {} has no K/V row for slot {}, head {}", il, slot, h);
  return (size_t{slot - L.n_slots} * hp.n_head_kv + size_t(h)) * hp.head_dim;
}

void RingSession::check_device_row(int il, uint32_t slot, int h) const {
  const ModelHparams& hp = model_->hparams();
  if (il < 0 || il >= hp.n_layer || hp.is_bounded(il) || h < 0 || h >= hp.n_head_kv ||
      slot >= (layers_[il].sliding ? layers_[il].n_slots : config_.ring.n_slots))
    throw_error("session: layer {} has no K/V row for slot {}, head {}", il, slot, h);
}

void RingSession::kv_row(int il, uint32_t slot, int h, float* k, float* v) const {
  if (compute_) {
    check_device_row(il, slot, h);
    compute_->kv_row(il, slot, h, k, v);
    return;
  }
  const Layer& L = layers_[il];
  const auto hd = static_cast<size_t>(model_->hparams().head_dim);
  if (slot < L.n_slots) {
    const size_t at = (size_t(h) * L.n_slots + slot) * hd;
    if (k) std::memcpy(k, L.k.data() + at, hd * sizeof(float));
    if (v) std::memcpy(v, L.v.data() + at, hd * sizeof(float));
    return;
  }
  const size_t at = recall_row_at(il, slot, h);
  for (size_t i = 0; k && i < hd; ++i) k[i] = fp16_to_fp32(L.rk[at + i]);
  for (size_t i = 0; v && i < hd; ++i) v[i] = fp16_to_fp32(L.rv[at + i]);
}

void RingSession::kv_slots(int il, std::span<const uint32_t> slots, float* k, float* v) const {
  if (compute_) {
    for (const uint32_t slot : slots) check_device_row(il, slot, 0);
    compute_->kv_slots(il, slots, k, v);
    return;
  }
  const size_t hd = static_cast<size_t>(model_->hparams().head_dim);
  const size_t row = static_cast<size_t>(model_->hparams().n_head_kv) * hd;
  for (size_t i = 0; i < slots.size(); ++i)
    for (int h = 0; h < model_->hparams().n_head_kv; ++h)
      kv_row(il, slots[i], h, k + i * row + h * hd, v + i * row + h * hd);
}

void RingSession::set_kv_slots(int il, std::span<const uint32_t> slots, const float* k,
                               const float* v) {
  if (compute_) {
    for (const uint32_t slot : slots) check_device_row(il, slot, 0);
    compute_->set_kv_slots(il, slots, k, v);
    return;
  }
  const size_t hd = static_cast<size_t>(model_->hparams().head_dim);
  const size_t row = static_cast<size_t>(model_->hparams().n_head_kv) * hd;
  for (size_t i = 0; i < slots.size(); ++i)
    for (int h = 0; h < model_->hparams().n_head_kv; ++h)
      set_kv_row(il, slots[i], h, k + i * row + h * hd, v + i * row + h * hd);
}

void RingSession::set_kv_row(int il, uint32_t slot, int h, const float* k, const float* v) {
  if (compute_) {
    check_device_row(il, slot, h);
    compute_->set_kv_row(il, slot, h, k, v);
    return;
  }
  Layer& L = layers_[il];
  const auto hd = static_cast<size_t>(model_->hparams().head_dim);
  if (slot < L.n_slots) {
    std::memcpy(L.k.data() + (size_t(h) * L.n_slots + slot) * hd, k, hd * sizeof(float));
    std::memcpy(L.v.data() + (size_t(h) * L.n_slots + slot) * hd, v, hd * sizeof(float));
    return;
  }
  const size_t at = recall_row_at(il, slot, h);
  for (size_t i = 0; i < hd; ++i) {
    L.rk[at + i] = fp32_to_fp16(k[i]);
    L.rv[at + i] = fp32_to_fp16(v[i]);
  }
}

void RingSession::check_room(size_t n) const {
  if (!ring_.sealed()) {
    const uint32_t limit = SlotGeometry::max_anchors(config_.ring.n_slots, config_.ring.n_recall,
                                                     1 + config_.ring.probe_reserve);
    if (ring_.clock() + n > limit)
      throw_error("session: anchors too long for the geometry: {} + {} tokens, at most {} fit",
                  ring_.clock(), n, limit);
  }
  if (ring_.clock() + n > uint64_t{INT32_MAX})
    throw_error("session: clock would pass 2^31 tokens");
}

// Each query's runs are taken right after its own token is appended, so it sees the window
// as plain one-token decoding would. A chunk runs up to n_batch tokens, across span starts
// and evictions: only a token that would evict a token of its own chunk (whose K/V is not
// written yet: a window smaller than the chunk) starts the next chunk. The evicted slots are
// written again by later tokens of the chunk while earlier queries of it still see them, so
// the ring's attention stores and attends in segments (Backend::segment_end): token c writes
// the slot of clock c - window_size, which query a sees iff c - window_size >= oldest(a).
void RingSession::run_chunks(std::span<const int32_t> tokens, float* all, const uint8_t* starts,
                             SpanType type) {
  const size_t n_vocab = static_cast<size_t>(model_->hparams().n_vocab);
  size_t done = 0;
  while (done < tokens.size()) {
    const size_t rest = tokens.size() - done;
    const size_t n_max = std::min<size_t>(rest, config_.n_batch);
    const size_t n = run_chunk(tokens.subspan(done, n_max), all ? all + done * n_vocab : nullptr,
                               done, starts ? starts + done : nullptr, type, n_max == rest);
    if (!hook_live_)  // a tentative decode_all keeps each query's distance for truncate_last
      std::copy_n(distances_.begin(), n, tentative_distances_.begin() + done);
    done += n;
  }
}

size_t RingSession::query_dim() const {
  return size_t(model_->hparams().n_head) * model_->hparams().head_dim;
}

size_t RingSession::run_chunk(std::span<const int32_t> chunk, float* all, size_t offset,
                              const uint8_t* starts, SpanType type, bool last) {
  if (capture_q_)
    queries_.resize(static_cast<size_t>(config_.n_batch) * global_layers_.size() * query_dim());
  const uint32_t n_rot = rope_global_.n_rot;
  const uint64_t first_clock = ring_.clock();
  size_t count = 0;
  for (; count < chunk.size(); ++count) {
    const size_t t = count;
    if (starts && starts[t]) ring_.begin_span(type);
    if (t > 0 && ring_.next_append_evicts_from(first_clock)) break;
    clocks_[t] = ring_.clock();
    global_slots_[t] = ring_.append_token();
    oldest_[t] = ring_.oldest();
    const QueryView view = global_runs(ring_, clocks_[t], runs_[t]);
    distances_[t] = view.max_distance;
    max_distance_ = std::max(max_distance_, view.max_distance);
    if (local_) {
      local_slots_[t] = local_->slot_of(clocks_[t]);
      local_runs_[t] = local_->run(clocks_[t]);
      rope_cos_sin(rope_sliding_, static_cast<double>(clocks_[t]), &cs_sliding_[t * n_rot]);
    }
    rope_cos_sin(rope_global_, static_cast<double>(clocks_[t]), &cs_global_[t * n_rot]);
  }
  const int n = static_cast<int>(count);
  const std::span<const int32_t> tokens = chunk.first(count);
  // Before seal() every token is an anchor in a slot of its own: one segment.
  const uint64_t window = ring_.sealed() ? ring_.geometry().window_size() : 0;
  for (int a = 0, e = 0; a < n; ++a) {
    e = std::max(e, a + 1);
    while (e < n && (window == 0 || clocks_[e] < oldest_[a] + window)) ++e;
    segment_end_[a] = e;
  }
  const LogitsFor which = all                           ? LogitsFor::all
                          : last && count == chunk.size() ? LogitsFor::last
                                                          : LogitsFor::none;
  if (compute_) {
    RingChunk c;
    c.tokens = tokens;
    c.clocks = std::span<const uint64_t>(clocks_.data(), count);
    c.global_slots = std::span<const uint32_t>(global_slots_.data(), count);
    if (local_) {
      c.local_slots = std::span<const uint32_t>(local_slots_.data(), count);
      c.local_runs = std::span<const SlotRun>(local_runs_.data(), count);
    }
    c.runs = std::span<const std::vector<SlotRun>>(runs_.data(), count);
    c.segment_end = std::span<const int>(segment_end_.data(), count);
    c.which = which;
    c.logits = all ? all : logits_.data();
    c.residual = tap_ ? residual_.data() : nullptr;
    c.queries = capture_q_ ? queries_.data() : nullptr;
    if (!bounded_layers_.empty()) {
      if (bounded_dirty_)  // the host rings changed (truncate, probe rollback, a file)
        for (int il : bounded_layers_) compute_->load_bounded(il, bounded_.state(il));
      bounded_dirty_ = false;
      c.bounded_seen = bounded_.state(bounded_layers_.front()).seen();
      c.bounded_kv = bounded_kv_.data();
    }
    try {
      compute_->forward(c);
    } catch (...) {
      bounded_dirty_ = true;  // the device may hold part of the chunk
      throw;
    }
    // The host's bounded rings follow: the device returned each layer's keys and values.
    const size_t kvd = size_t(model_->hparams().n_head_kv) * model_->hparams().head_dim;
    for (size_t b = 0; b < bounded_layers_.size(); ++b)
      for (size_t t = 0; t < count; ++t) {
        const float* kv = bounded_kv_.data() + (b * count + t) * 2 * kvd;
        bounded_.state(bounded_layers_[b]).insert(kv, kv + kvd);
      }
  } else {
    forward(*model_, ForwardBatch{tokens, layer_attention_}, which, scratch_, pool_,
            all ? all : logits_.data());
  }
  if (tap_) {
    const size_t QD = capture_q_ ? global_layers_.size() * query_dim() : 0;
    // forward() leaves every token's last residual in scratch.x; the final norm of each
    // row is what the LM head reads (it normed only the last row itself).
    const size_t E = static_cast<size_t>(model_->hparams().n_embd);
    hidden_.resize(static_cast<size_t>(config_.n_batch) * E);
    for (int t = 0; t < n; ++t)
      rms_norm((compute_ ? residual_.data() : scratch_.x.data()) + t * E,
               model_->weights().output_norm.data(),
               static_cast<int64_t>(E), model_->hparams().rms_eps, hidden_.data() + t * E);
    if (!hook_live_) {  // a tentative decode_all: the kept tokens reach the tap when settled
      std::copy(tokens.begin(), tokens.end(), tentative_tokens_.begin() + offset);
      std::copy_n(clocks_.begin(), n, tentative_clocks_.begin() + offset);
      std::copy_n(global_slots_.begin(), n, tentative_slots_.begin() + offset);
      tentative_hidden_.resize(tentative_tokens_.size() * E);
      std::copy_n(hidden_.begin(), n * E, tentative_hidden_.begin() + offset * E);
      if (QD > 0) {
        tentative_queries_.resize(tentative_tokens_.size() * QD);
        std::copy_n(queries_.begin(), n * QD, tentative_queries_.begin() + offset * QD);
      }
      return count;
    }
    tap_(TokenBatch{tokens, std::span<const uint64_t>(clocks_.data(), tokens.size()),
                    std::span<const uint32_t>(global_slots_.data(), tokens.size()),
                    std::span<const float>(hidden_.data(), tokens.size() * E),
                    std::span<const float>(queries_.data(), QD > 0 ? tokens.size() * QD : 0),
                    ring_.probing()});
  }
  return count;
}

uint32_t RingSession::inject_recall(uint64_t id, uint32_t n_tokens, uint64_t stored_pos,
                                    std::span<const float> k, std::span<const float> v) {
  const ModelHparams& hp = model_->hparams();
  const size_t hd = static_cast<size_t>(hp.head_dim), nkv = static_cast<size_t>(hp.n_head_kv);
  const size_t want = global_layers_.size() * n_tokens * nkv * hd;
  if (k.size() != want || v.size() != want)
    throw_error(
        "session: recall episode {}: {} K and {} V values, expected {} ({} global layers x "
        "{} tokens x {})",
        id, k.size(), v.size(), want, global_layers_.size(), n_tokens, nkv * hd);
  return inject_recall(id, n_tokens, stored_pos, [&](const KvRowsF16& out) {
    const size_t per_layer = size_t{n_tokens} * nkv * hd;  // [t][nkv][hd], as the target
    for (size_t g = 0; g < out.k.size(); ++g)
      for (size_t i = 0; i < per_layer; ++i) {
        out.k[g][i] = fp32_to_fp16(k[g * per_layer + i]);
        out.v[g][i] = fp32_to_fp16(v[g * per_layer + i]);
      }
  });
}

uint32_t RingSession::inject_recall(uint64_t id, uint32_t n_tokens, uint64_t stored_pos,
                                    const std::function<void(const KvRowsF16&)>& fill,
                                    double rotate_keys_by) {
  settle(0);
  const uint32_t first = ring_.activate_recall(id, n_tokens, stored_pos);
  // The episode's rows are consecutive in every global layer's recall tier.
  const ModelHparams& hp = model_->hparams();
  const size_t row = size_t(hp.n_head_kv) * hp.head_dim;
  const size_t at = size_t{first - recall_begin()} * row;
  recall_k_.resize(global_layers_.size());
  recall_v_.resize(global_layers_.size());
  const size_t rows = size_t{n_tokens} * row;  // one layer's rows of the episode
  uint16_t* staging = nullptr;  // on a device: the episode's rows on their way there
  if (compute_) {
    staging = compute_->recall_staging(2 * global_layers_.size() * rows);
    if (!staging) {
      recall_staging_.resize(2 * global_layers_.size() * rows);
      staging = recall_staging_.data();
    }
  }
  for (size_t g = 0; g < global_layers_.size(); ++g) {
    if (compute_) {  // staged on the host, then copied into the device's recall tier
      recall_k_[g] = staging + 2 * g * rows;
      recall_v_[g] = recall_k_[g] + rows;
    } else {
      recall_k_[g] = layers_[global_layers_[g]].rk.data() + at;
      recall_v_[g] = layers_[global_layers_[g]].rv.data() + at;
    }
  }
  try {
    KvRowsF16 target{recall_k_, recall_v_, row, n_tokens};
    if (compute_ && staging != recall_staging_.data())  // the device's own staging memory
      target.ready = [this, rows](size_t first, size_t count) {
        compute_->recall_planes_ready(first, count, rows);
      };
    fill(target);
    if (compute_)  // staged as [g][K|V][n_tokens][row]: one call for every layer
      compute_->write_recall_f16(global_layers_, first, n_tokens, row, staging, rotate_keys_by);
    if (!compute_ && rotate_keys_by != 0.0) {  // the keys turned here, row by row
      const size_t hd = static_cast<size_t>(hp.head_dim);
      std::vector<float> cs(rope_global_.n_rot), head(hd);
      rope_cos_sin(rope_global_, rotate_keys_by, cs.data());
      for (size_t g = 0; g < global_layers_.size(); ++g)
        for (size_t h = 0; h < size_t{n_tokens} * hp.n_head_kv; ++h) {
          uint16_t* r = recall_k_[g] + h * hd;
          for (size_t i = 0; i < hd; ++i) head[i] = fp16_to_fp32(r[i]);
          rope_rotate(rope_global_, cs.data(), head.data(), head.data(), 1, static_cast<uint32_t>(hd));
          for (size_t i = 0; i < hd; ++i) r[i] = fp32_to_fp16(head[i]);
        }
    }
  } catch (...) {
    ring_.deactivate_recall(id);
    throw;
  }
  return first;
}

std::optional<uint32_t> RingSession::inject_recall_stored(uint64_t id, uint64_t stored_pos,
                                                          const StoredKvF16& source,
                                                          double rotate_keys_by) {
  const ModelHparams& hp = model_->hparams();
  if (source.row_dim != size_t(hp.n_head_kv) * hp.head_dim ||
      source.n_planes != 2 * global_layers_.size())
    throw_error("session: a stored episode of {} planes of rows of {} for {} global layers of {}",
                source.n_planes, source.row_dim, global_layers_.size(),
                size_t(hp.n_head_kv) * hp.head_dim);
  if (!compute_ || !compute_->takes_stored(source)) return std::nullopt;
  settle(0);
  const auto n_tokens = static_cast<uint32_t>(source.n_tokens);
  const uint32_t first = ring_.activate_recall(id, n_tokens, stored_pos);
  try {
    compute_->write_recall_stored(global_layers_, first, n_tokens, source, rotate_keys_by);
  } catch (...) {
    ring_.deactivate_recall(id);
    throw;
  }
  return first;
}

std::span<const float> RingSession::append(SpanType type, std::span<const int32_t> tokens) {
  begin_span(type);
  try {
    return decode(tokens);
  } catch (...) {
    pending_span_.reset();  // refused tokens open no span
    throw;
  }
}

std::span<const float> RingSession::feed(SpanType type, std::span<const int32_t> tokens,
                                         std::span<const uint8_t> starts) {
  before_decode();
  check_tokens(tokens);
  if (starts.size() != tokens.size())
    throw_error("session: feed of {} tokens with {} span-start marks", tokens.size(),
                starts.size());
  if (static_cast<unsigned>(type) >= kSpanTypeCount)
    throw_error("session: span type {} out of range", static_cast<unsigned>(type));
  open_pending_span();
  run_chunks(tokens, nullptr, starts.data(), type);
  return logits_;
}

std::span<const float> RingSession::feed_all(SpanType type, std::span<const int32_t> tokens,
                                             std::span<const uint8_t> starts) {
  if (starts.size() != tokens.size())
    throw_error("session: feed of {} tokens with {} span-start marks", tokens.size(),
                starts.size());
  if (static_cast<unsigned>(type) >= kSpanTypeCount)
    throw_error("session: span type {} out of range", static_cast<unsigned>(type));
  feed_all_starts_ = starts.data();
  feed_all_type_ = type;
  struct Forget {  // the starts are this call's only, also when it throws
    const uint8_t*& starts;
    ~Forget() { starts = nullptr; }
  } forget{feed_all_starts_};
  return decode_all(tokens);
}

void RingSession::open_pending_span() {
  if (pending_span_) {
    ring_.begin_span(*pending_span_);
    pending_span_.reset();
  }
}

void RingSession::run(std::span<const int32_t> tokens, float* all) {
  open_pending_span();
  if (!all) {
    run_chunks(tokens);
    return;
  }
  const bool tentative = tokens.size() <= max_truncate();
  const uint8_t* starts = feed_all_starts_;  // feed_all's, or none
  if (tentative) {  // what truncate_last goes back to; the hook waits for it
    saved_ring_.copy_state_from(ring_);
    saved_max_distance_ = max_distance_;
    std::copy(logits_.begin(), logits_.end(), saved_logits_.begin());
    for (size_t i = 0; i < tokens.size(); ++i) tentative_starts_[i] = starts ? starts[i] : 0;
    tentative_type_ = feed_all_type_;
    hook_live_ = false;
  }
  run_chunks(tokens, all, starts, feed_all_type_);
  hook_live_ = true;
  tentative_ = tentative ? static_cast<uint32_t>(tokens.size()) : 0;
}

// Ends the tentative decode_all (if any), keeping all but its last k tokens.
void RingSession::settle(int k) {
  if (k < 0 || static_cast<uint32_t>(k) > tentative_)
    throw_error(
        "session: cannot drop the last {} tokens: {} tokens can be dropped now (only "
        "those of the decode_all just made, of at most {} tokens)",
        k, tentative_, max_truncate());
  if (tentative_ == 0) return;
  const ModelHparams& hp = model_->hparams();
  for (int il = 0; il < hp.n_layer; ++il)  // check every layer before changing any
    if (hp.is_bounded(il) && bounded_.state(il).undo_available() < k)
      throw_error("session: cannot drop {} tokens: bounded layer {} keeps undo history for {}", k,
                  il, bounded_.state(il).undo_available());
  const uint32_t keep = tentative_ - static_cast<uint32_t>(k);
  tentative_ = 0;
  // append_token() is deterministic: from the saved state the kept tokens get their slots
  // back and evict exactly what plain decoding evicts, now with the hook live.
  ring_.copy_state_from(saved_ring_);
  max_distance_ = saved_max_distance_;
  for (uint32_t i = 0; i < keep; ++i) {
    if (tentative_starts_[i]) ring_.begin_span(tentative_type_);  // as run_chunk began it
    ring_.append_token();
    max_distance_ = std::max(max_distance_, tentative_distances_[i]);
  }
  for (int il = 0; il < hp.n_layer; ++il)
    if (hp.is_bounded(il)) bounded_.state(il).truncate_last(k);
  if (k > 0) bounded_dirty_ = true;
  if (tap_ && keep > 0) {
    const size_t E = static_cast<size_t>(hp.n_embd);
    tap_(TokenBatch{std::span<const int32_t>(tentative_tokens_.data(), keep),
                    std::span<const uint64_t>(tentative_clocks_.data(), keep),
                    std::span<const uint32_t>(tentative_slots_.data(), keep),
                    std::span<const float>(tentative_hidden_.data(), keep * E),
                    std::span<const float>(tentative_queries_.data(),
                                           capture_q_ ? keep * global_layers_.size() * query_dim()
                                                      : 0),
                    false});
  }
  if (keep == 0) {
    std::copy(saved_logits_.begin(), saved_logits_.end(), logits_.begin());
  } else {
    const auto row = all_logits_.begin() + static_cast<std::ptrdiff_t>((keep - 1) * logits_.size());
    std::copy(row, row + static_cast<std::ptrdiff_t>(logits_.size()), logits_.begin());
  }
}

void RingSession::seal() {
  settle(0);
  ring_.seal();
}

// Bounded layers roll back by a bit-for-bit copy (a probe may be longer than their undo
// history). The copies are allocated by the first probe; later copies reuse their buffers.
void RingSession::save_bounded() {
  const ModelHparams& hp = model_->hparams();
  probe_saved_.resize(hp.n_layer);
  for (int il = 0; il < hp.n_layer; ++il)
    if (hp.is_bounded(il)) probe_saved_[il].state = bounded_.state(il);
}

void RingSession::restore_bounded() {
  const ModelHparams& hp = model_->hparams();
  for (int il = 0; il < hp.n_layer; ++il)
    if (hp.is_bounded(il)) bounded_.state(il).restore(probe_saved_[il]);
  bounded_dirty_ = true;
}

uint32_t RingSession::max_probe() const {
  if (!ring_.sealed()) return 0;
  const uint32_t global = ring_.free_window();
  return local_ ? std::min(global, local_->n_slots() - local_->window()) : global;
}

std::vector<float> RingSession::probe(std::span<const int32_t> tokens, SpanType type) {
  check_tokens(tokens);
  if (!ring_.sealed()) throw_error("session: probe before the anchors are sealed");
  settle(0);
  if (tokens.size() > max_probe())
    throw_error("session: probe of {} tokens is longer than the free window ({} tokens)",
                tokens.size(), max_probe());
  const std::vector<float> saved_logits(logits_.begin(), logits_.end());
  save_bounded();
  const ProbeMark mark = ring_.begin_probe();
  std::vector<float> out;
  try {
    ring_.begin_span(type);
    run_chunks(tokens);
    out.assign(logits_.begin(), logits_.end());
  } catch (...) {
    ring_.rollback_clock(mark);
    restore_bounded();
    std::copy(saved_logits.begin(), saved_logits.end(), logits_.begin());
    throw;
  }
  ring_.rollback_clock(mark);
  restore_bounded();
  std::copy(saved_logits.begin(), saved_logits.end(), logits_.begin());
  return out;
}

}  // namespace channel
