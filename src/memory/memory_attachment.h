// MemoryAttachment: an episodic store attached to a live RingSession. What leaves the
// window is staged by the eviction hook (token, clock, slot, the final hidden state x the
// session's token tap reported, and the K/V rows of every global layer, copied while the
// slots are still intact), cut into episodes and written by a background thread; recall
// queries the store, rehydrates the chosen episodes (keys re-rotated to the virtual position
// they get in tier 3) and writes them into the recall slots of the global layers.
// Sliding-window layers never see recalled K/V (docs/kv-geometry.md).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "memory/consolidation.h"
#include "memory/recall_copy.h"
#include "memory/episodic_store.h"
#include "memory/recall_method.h"
#include "memory/rerotate.h"
#include "memory/retrieval_features.h"
#include "memory/retrieval_head.h"
#include "memory/staging.h"
#include "runtime/ring_session.h"

namespace channel {

class Model;
struct ModelHparams;
class ThreadPool;

struct MemoryConfig {
  StagingConfig staging;        // cut triggers; staging.capacity = tokens per episode
  // Episodes waiting for the writer; beyond it the eviction waits for room (nothing is
  // dropped). Each holds its tokens' K/V and hidden states, so this bounds the memory the
  // queue can take: 32 episodes of the built-in model's 64 tokens are about 8 MB.
  size_t queue_capacity = 32;
  bool consolidate = true;      // false: nothing is staged or written (benchmarks, read-only)
  int query_threads = 1;        // threads of the top-k scan and of large rehydrations
  // Summary text of an episode's tokens (normally the detokenizer); optional.
  std::function<std::string(std::span<const int32_t>)> summarize;
  // Sees each episode as it is cut, before it is queued (tests, statistics); optional.
  std::function<void(const StagedEpisode&)> on_episode;
  // Recall copy (memory/recall_copy.h): bias_toward_recalled()'s bonus; bias 0: off.
  RecallCopyConfig copy;
};

// The layers that keep per-token K/V in the slot geometry and hold recall slots: every
// layer that is neither sliding-window nor bounded. A store keeps these layers, in order.
std::vector<int> recall_layers(const ModelHparams& hp);

// The store geometry a session of `model` writes: one layer per global layer, kv_dim =
// n_head_kv * head_dim, hidden = n_embd; version 3: R representative keys per KV head, each
// token's projected vector when the model carries a retrieval head, and the lexical section.
inline constexpr uint32_t kDefaultKeysPerHead = 8;
StoreGeometry session_store_geometry(const Model& model, uint32_t max_episodes,
                                     uint32_t max_tokens,
                                     uint32_t keys_per_head = kDefaultKeysPerHead);

// Opens `path` for `model` (a store of another model or another geometry is a one-line
// error, the file untouched), or creates it with session_store_geometry() when it does not
// exist. *created tells which.
EpisodicStore open_or_create_store(const std::string& path, const Model& model,
                                   uint32_t max_episodes, uint32_t max_tokens,
                                   bool* created = nullptr);

// The method `m` stands for with a store of layout L and a model with (or without) a
// retrieval head: automatic is proj when both have the head's vectors, else keys when the
// store has them, else centroid. Throws channel::Error (one line naming the store) when an
// explicit method is not available.
RecallMethod resolve_recall_method(RecallMethod m, const StoreLayout& L, bool model_has_head,
                                   const std::string& path);

struct RecallResult {
  uint64_t episode_id = 0;
  float score = 0.0f;       // cosine of the query (0 for recall by id)
  uint32_t slot_begin = 0;  // first recall slot
  uint32_t n_tokens = 0;
  uint64_t stored_pos = 0;         // keys were re-rotated to stored_pos + i
  bool already_active = false;     // it was in tier 3 already: only its recency changed
  std::vector<uint64_t> released;  // episodes evicted from tier 3 to make room (LRU)
};

// One token's state as a cue: its final hidden state x and, when captured, its queries at
// every global layer ([n_global][n_head * head_dim], after q-norm, before RoPE).
struct CueState {
  std::vector<float> hidden;
  std::vector<float> queries;
  // Optional: the centroid cue of centroid and hybrid recall instead of `hidden` (e.g. a
  // prompt's text cue, the mean of its hidden states, as spec 003 encodes episodes).
  std::vector<float> centroid;
  // The last kCueTokens tokens before the cue (probe tokens included): the lexical half of
  // hybrid recall (RetrievalCue::tokens).
  std::vector<int32_t> tokens;
  bool empty() const { return hidden.empty(); }
};
inline constexpr size_t kCueTokens = 64;

struct MemoryStats {
  uint64_t tokens_staged = 0;  // evicted tokens handed to the staging buffer
  uint64_t episodes_cut = 0;
  WorkerStats worker;
  uint64_t recalls = 0;
  uint64_t recall_evictions = 0;
};

class MemoryAttachment {
 public:
  // Installs the session's eviction hook and token tap (replacing any). The store must have
  // the session's geometry (session_store_geometry). Both must outlive the attachment.
  MemoryAttachment(RingSession& session, EpisodicStore& store, MemoryConfig config = {});
  ~MemoryAttachment();  // flush(), then removes the hook and the tap
  MemoryAttachment(const MemoryAttachment&) = delete;
  MemoryAttachment& operator=(const MemoryAttachment&) = delete;

  // Cuts what is staged into an episode and waits until every queued episode is written.
  // Note that tokens still in the window are not staged: they are stored once evicted.
  void flush();
  // Cuts what is staged (a turn boundary) without waiting for the disk.
  void cut(CutReason reason = CutReason::turn_end);
  // Stages every token still in the window, oldest span first, as if it were evicted now,
  // then flush(): for a session that ends without being saved (its window is never evicted).
  // A session that is saved and resumed must not call it: the tokens would be stored twice.
  void consolidate_window();

  // Cosine top-k over the stored centroids; `query` is [n_embd] (a hidden state, or a text
  // cue encoded by text_cue.h), not necessarily normalised.
  std::vector<RecallHit> query(std::span<const float> query, size_t k) const;
  // The method `m` stands for with this model and store: automatic is proj when both have
  // a retrieval head's vectors, else keys when the store has them, else centroid. Throws
  // channel::Error when an explicit method is not available.
  RecallMethod resolve(RecallMethod m) const;
  // Top-k by `m` (resolved) for one token's state: centroid and hybrid use cue.hidden as the
  // centroid cue, keys its queries, proj normalize(W_query cue.hidden).
  // use_pool = false: on the caller's thread only (a background thread beside the decode).
  // lexical > 0: ranks by z(method score) + lexical * the lexical score of cue.tokens (the
  // centroid method has no lexical half).
  std::vector<RecallHit> query_state(const CueState& cue, RecallMethod m, size_t k,
                                     bool use_pool = true, float lexical = 0.0f) const;
  // The state of the last (non-probe) token the session ran; empty before the first.
  CueState current_cue() const { return {last_hidden_, last_queries_, {}, recent_tokens()}; }
  // Runs `tokens` as a probe (the session is as before afterwards) and returns the state of
  // the last one: the cue of a prompt's last token before it is fed for real.
  CueState probe_cue(std::span<const int32_t> tokens);
  // Sees every non-probe token batch after the attachment has (the automatic recall's
  // condition C); optional, may be null.
  void set_observer(TokenTap observer) { observer_ = std::move(observer); }
  const RetrievalHead* retrieval_head() const { return head_.get(); }
  // The final hidden state x of the last (non-probe) token the session ran: the query of
  // recall by the current state. Empty before the first token.
  std::span<const float> current_state() const { return last_hidden_; }
  // Runs `tokens` as a probe (the session is as before afterwards) and returns the centroid
  // of their hidden states: a text cue encoded in the session's own context. Throws when
  // the probe does not fit (RingSession::max_probe()).
  std::vector<float> encode_in_context(std::span<const int32_t> tokens);

  // Rehydrates episode `id` into tier 3 (re-rotated by Δ = stored_pos - start_clock, where
  // stored_pos is the virtual position of its first token: anchors + recall tokens before
  // it), records the access in the store, and marks it most recently recalled. When the
  // recall tier has no room, the least recently recalled episodes are released first.
  // Throws channel::Error for an unknown id, a damaged record, or an episode longer than
  // the recall tier.
  RecallResult recall(uint64_t id, float score = 0.0f);
  // query() then recall() of each hit, best last so that it is the most recent.
  std::vector<RecallResult> recall_top(std::span<const float> query, size_t k);
  // Releases every recalled episode from tier 3, or one (a no-op when it is not there).
  void release_all();
  void release(uint64_t id);

  // Recall copy (memory/recall_copy.h): adds config.copy's bonus to the logits of the tokens
  // that continue, in an episode now in tier 3, the run the newest tokens repeat. The sampler's
  // logit bias of every front end with an attached store (Sampler::set_logit_bias). Returns the
  // length of the match (0: nothing changed). A record that cannot be read is left out.
  size_t bias_toward_recalled(std::span<float> logits);
  // The same as edits for the sampler (Sampler::LogitBias): appends them, returns the match.
  size_t recalled_bonus(size_t n_vocab, std::vector<LogitEdit>& edits);
  void set_copy(const RecallCopyConfig& copy) { config_.copy = copy; }
  const RecallCopyConfig& copy() const { return config_.copy; }

  MemoryStats stats() const;
  const EpisodicStore& store() const { return store_; }
  RingSession& session() { return session_; }

 private:
  void on_tokens(const TokenBatch& b);
  void on_evict(const EvictionEvent& ev);
  std::vector<int32_t> recent_tokens() const;  // the last kCueTokens run, oldest first

  RingSession& session_;
  EpisodicStore& store_;
  MemoryConfig config_;
  size_t n_embd_ = 0, kv_dim_ = 0, head_dim_ = 0, n_kv_heads_ = 0;
  std::vector<RotaryDims> rope_;                 // [1] the global layers' rope
  std::vector<RotationTable> rope_table_;        // [1] its precomputed angles
  std::unique_ptr<ThreadPool> pool_;             // top-k scan and large rehydrations
  std::unique_ptr<ConsolidationWorker> worker_;  // declared before staging_: it is its sink
  std::unique_ptr<StagingBuffer> staging_;
  // Per global-layer slot, written by the token tap, read at eviction:
  std::vector<int32_t> slot_token_;            // [n_slots]
  std::vector<float> slot_hidden_;             // [n_slots][n_embd]
  std::vector<float> kv_rows_;                 // [n_global][2][kv_dim] one token's rows, gathered
  std::vector<float> span_kv_;  // on a device: an evicted span's rows, [n_global][2][n][kv_dim]
  std::vector<const float*> k_ptrs_, v_ptrs_;  // [n_global] into kv_rows_
  std::vector<float> last_hidden_;             // [n_embd] x of the last token run
  std::vector<float> last_queries_;            // [n_global][qd] its queries, when captured
  size_t q_row_ = 0;                           // n_global * n_head * head_dim, 0: not captured
  std::vector<float> slot_queries_;            // [n_slots][q_row_]
  std::shared_ptr<const RetrievalHead> head_;  // the model's retrieval head, if any
  float attn_scale_ = 1.0f;
  uint32_t group_ = 1;
  TokenTap observer_;
  std::vector<int32_t> recent_;  // [kCueTokens] ring of the last tokens run
  uint64_t recent_n_ = 0;        // tokens written into recent_ so far
  bool capture_ = false;         // encode_in_context(): keep the probe's hidden states
  std::vector<float> captured_;  // [n][n_embd]
  std::vector<float> captured_q_;  // probe_cue(): the probe's last queries
  std::unordered_map<uint64_t, uint64_t> recalled_at_;  // active episode -> recall tick
  const void* stored_region_ = nullptr;  // the store's mapping, once handed to the device
  std::unordered_map<uint64_t, std::vector<int32_t>> tier3_tokens_;  // recall copy's sources
  std::vector<int32_t> copy_context_;  // scratch: recent_tokens() of bias_toward_recalled
  uint64_t tick_ = 0;
  uint64_t tokens_staged_ = 0, recalls_ = 0, recall_evictions_ = 0;
};

}  // namespace channel
