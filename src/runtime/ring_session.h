// RingSession: a conversation that runs forever in KV memory allocated once, through the
// fixed slot geometry of kv/ (docs/kv-geometry.md). Global layers keep n_slots slots
// (anchors, FIFO window, recall) and see keys at virtual positions; sliding layers keep
// W + max(probe_reserve, n_batch - 1) slots and see the last W tokens; bounded (swa_sink_v1)
// layers keep their own fixed-size BoundedState. Tokens are appended under semantic spans;
// probes run transient tokens and roll back without touching other K/V.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kv/kv_rows.h"
#include "ops/rope.h"
#include "kv/slot_attention.h"
#include "kv/slot_ring.h"
#include "kv/virtual_positions.h"
#include "model/forward.h"
#include "model/layer_attention.h"
#include "model/model.h"
#include "model/ring_compute.h"
#include "runtime/session_base.h"
#include "util/aligned_vector.h"

namespace channel {

// What the token tap sees after each forward chunk: the chunk's tokens in order, their
// clocks and global-layer slots, and their final hidden states x (the final-norm rows the
// LM head reads), computed in the same forward. `transient`: the tokens of a probe, whose
// slots are released again when the probe ends.
struct TokenBatch {
  std::span<const int32_t> tokens;   // [n]
  std::span<const uint64_t> clocks;  // [n]
  std::span<const uint32_t> slots;   // [n] slot of each token in every global layer
  std::span<const float> hidden;     // [n][n_embd]
  // With set_query_capture(true): the tokens' queries at every global layer, after q-norm and
  // before RoPE, [n][global_layers().size()][n_head * head_dim]; empty otherwise.
  std::span<const float> queries;
  bool transient = false;
};
using TokenTap = std::function<void(const TokenBatch&)>;

struct RingSessionConfig {
  RingConfig ring;    // n_slots (--slots), n_recall (--recall-slots), probe reserve, cut chunk
  int n_threads = 0;  // 0: one per hardware thread
  int n_batch = 64;   // most tokens per forward() chunk
  // Empty: the forward runs on the CPU. Else it makes the RingCompute that runs it on a
  // device (backend/cuda/cuda_ring.h), which then holds every layer's K/V; the ring, spans,
  // recall episodes and probes stay on the host as integers.
  RingComputeFactory compute;
};

class RingSession final : public SessionBase {
 public:
  // Allocates every K/V arena and scratch buffer now. Throws channel::Error for a geometry
  // that cannot hold a window, or whose n_slots cannot hold a sliding layer's window.
  RingSession(std::shared_ptr<const Model> model, const RingSessionConfig& config);
  ~RingSession() override;

  // Starts a span of `type` and appends `tokens` to it; returns the last token's logits
  // [n_vocab] (valid until the next call). Before seal() the tokens are anchors (cold boot).
  // Throws channel::Error, with the state unchanged, for an empty list, an id outside the
  // vocabulary, or anchors too long for the geometry.
  std::span<const float> append(SpanType type, std::span<const int32_t> tokens);
  // The tokens of the next decode or decode_all open a span of `type` (append in two steps:
  // a speculative run opens its prompt's span so).
  void begin_span(SpanType type) { pending_span_ = type; }
  // Text cut into spans: a span of `type` begins at every token i with starts[i] != 0, and
  // tokens[0] continues the current span (or the one begin_span named) when starts[0] == 0
  // (an error when none was begun). The K/V, spans, evictions, hook and tap events, the
  // logits and the state are those of append() for each span start and decode() for what
  // follows it, call after call; but the forward chunks (n_batch tokens) run across span
  // boundaries. Returns the last token's logits. starts.size() must equal tokens.size().
  std::span<const float> feed(SpanType type, std::span<const int32_t> tokens,
                              std::span<const uint8_t> starts);
  // decode_all with feed()'s span starts: every token's logits [n][n_vocab], tentative as
  // decode_all is (a speculative verify of generated text cut at sentence ends); truncate_last
  // begins the kept tokens' spans again as this call did.
  std::span<const float> feed_all(SpanType type, std::span<const int32_t> tokens,
                                  std::span<const uint8_t> starts);
  // decode (SessionBase) appends to the current span (e.g. one generated token); an error
  // when none was begun.
  // decode_all (SessionBase): a call of at most max_truncate() tokens is tentative:
  // truncate_last() may follow and drop its last tokens (a rejected speculative draft). Its
  // evictions reach the eviction hook when it is settled: by truncate_last(), or first thing
  // in the next call that changes the session; ring() already shows them.
  // truncate_last(k) drops the last k tokens of the tentative decode_all just made (k = 0
  // keeps all): the ring goes back to its state before that call and appends the kept tokens
  // again, so they get the same slots (where their K/V already is) and evictions and hook
  // events are those of plain decoding; bounded layers undo k insertions. Throws
  // channel::Error, state unchanged, when k < 0, k exceeds that call's tokens, or k > 0 with
  // no tentative call to cut.
  //
  // The longest tentative decode_all: probe_reserve. Its tokens then write only slots whose
  // tokens were evicted before it, so every span it evicts keeps its K/V until the hook runs.
  uint32_t max_truncate() const { return config_.ring.probe_reserve; }
  int64_t room() const override { return int64_t{INT32_MAX} - int64_t(ring_.clock()); }
  int verify_capacity() const override { return static_cast<int>(max_truncate()); }
  const char* verify_capacity_hint() const override { return "the ring's probe_reserve"; }
  // Ends the cold boot: the tokens so far become the immutable anchors.
  void seal();

  // Runs `tokens` as transient tokens in a span of `type` and rolls back: returns the last
  // token's logits; clock, table, spans and every other slot's K/V are as before. Throws,
  // with the state unchanged, when the probe is longer than max_probe().
  std::vector<float> probe(std::span<const int32_t> tokens, SpanType type = SpanType::thought);
  uint32_t max_probe() const;

  const SlotRing& ring() const { return ring_; }
  // Called with every eviction while the evicted slots' K/V is intact (settles a tentative
  // decode_all first, so its events go to the previous hook).
  void set_eviction_hook(EvictionHook hook);
  // Called after every forward chunk (episodic memory stages evicted tokens from it). The
  // tokens of a tentative decode_all reach it when settled, only those kept.
  void set_token_tap(TokenTap tap) {
    settle(0);
    tap_ = std::move(tap);
  }
  // Whether the token tap also gets the global layers' queries (TokenBatch::queries). Off by
  // default: plain decoding copies nothing.
  void set_query_capture(bool on) {
    settle(0);
    capture_q_ = on;
  }
  size_t query_dim() const;  // n_head * head_dim: one token's queries of one global layer
  uint64_t max_distance() const { return max_distance_; }  // largest one seen so far
  size_t kv_bytes() const;
  // The device that runs the forward and holds the K/V ("" on the CPU).
  bool on_device() const { return compute_ != nullptr; }
  std::string device_name() const { return compute_ ? compute_->device_name() : std::string(); }

  // The f32 K/V arenas of layer il, [n_head_kv][layer_slots(il)][head_dim], keys stored
  // rotated; empty on a bounded layer, whose state is bounded_state(il), and when a device
  // holds the K/V (on_device(): read rows through kv_row). A global layer's
  // arena holds anchors and window (slots below recall_begin()); its recall slots are f16.
  std::span<const float> layer_k(int il) const { return layers_[il].k; }
  std::span<const float> layer_v(int il) const { return layers_[il].v; }
  const BoundedState& bounded_state(int il) const { return bounded_.state(il); }
  uint32_t layer_slots(int il) const { return layers_[il].n_slots; }
  // The recall tier of global layer il (empty when on_device()) as f16 bits, token-major: [n_recall][n_head_kv *
  // head_dim], row r holding slot recall_begin() + r. Half the bytes of f32, and the layout
  // of an episode's planes in its .episodic.mem slab, so recall reads land there directly.
  std::span<const uint16_t> recall_k(int il) const { return layers_[il].rk; }
  std::span<const uint16_t> recall_v(int il) const { return layers_[il].rv; }
  uint32_t recall_begin() const { return config_.ring.n_slots - config_.ring.n_recall; }
  // Head h's K and V rows (head_dim floats each) of `slot` in non-bounded layer il, wherever
  // the slot lives (a recall slot's f16 widened exactly), and the converse (a recall slot's
  // rows rounded to f16; on a device, rows as the device stores them). For session files,
  // memory staging and tests; throws for a slot the layer lacks.
  // kv_row skips a null k or v.
  void kv_row(int il, uint32_t slot, int h, float* k, float* v) const;
  void set_kv_row(int il, uint32_t slot, int h, const float* k, const float* v);
  // kv_row of every KV head: k, v [n_head_kv][head_dim] (on a device: one copy each).
  void kv_slot(int il, uint32_t slot, float* k, float* v) const { kv_slots(il, {&slot, 1}, k, v); }
  // kv_slot of each of `slots`: k, v [slots.size()][n_head_kv][head_dim] (on a device: one copy
  // each per run of consecutive slots).
  void kv_slots(int il, std::span<const uint32_t> slots, float* k, float* v) const;
  // set_kv_row of every KV head of each of `slots`: k, v [slots.size()][n_head_kv][head_dim].
  void set_kv_slots(int il, std::span<const uint32_t> slots, const float* k, const float* v);

  // --- recall (episodic memory) -------------------------------------------------------
  // The layers that go through the slot geometry (neither sliding nor bounded): the only
  // ones that hold recall slots. The rope their keys are stored with.
  std::span<const int> global_layers() const { return global_layers_; }
  const RopeFreqs& rope_global() const { return rope_global_; }
  // Activates episode `id` in the recall tier (SlotRing::activate_recall) and writes its K/V
  // into those slots of every global layer, rounded to f16. k, v: [global_layers().size()]
  // [n_tokens][n_head_kv * head_dim], keys already rotated at stored_pos + i. Returns the
  // first slot. Throws, with the state unchanged, when the sizes are wrong or the recall tier
  // has no room.
  uint32_t inject_recall(uint64_t id, uint32_t n_tokens, uint64_t stored_pos,
                         std::span<const float> k, std::span<const float> v);
  // The same without a staging copy: activates the episode and hands `fill` its recall rows
  // (kv/kv_rows.h KvRowsF16; target layer g is global layer global_layers()[g]: n_tokens
  // consecutive f16 rows of n_head_kv * head_dim) to write keys rotated at stored_pos + i and
  // values into. If fill throws, the episode is deactivated again (its slots were free: what
  // fill wrote there is never attended) and the exception propagates.
  // rotate_keys_by != 0: fill writes the keys as stored (rotated at stored_pos + i -
  // rotate_keys_by) and the session turns them by rotate_keys_by positions (rope_global(),
  // in f32, rounded back to f16): on a device (on_device()) the device does, after copying the
  // rows into its recall tier; on the CPU here.
  uint32_t inject_recall(uint64_t id, uint32_t n_tokens, uint64_t stored_pos,
                         const std::function<void(const KvRowsF16&)>& fill,
                         double rotate_keys_by = 0.0);
  // On a device that takes it from where it is stored (RingCompute::takes_stored): activates
  // the episode and has the device copy `source`, check it (source.verify) and turn the keys by
  // rotate_keys_by; returns the first slot. A damaged record throws with the episode inactive
  // (its slots are never attended). Returns nullopt, nothing changed, where the device does
  // not take it (on the CPU, or its pages cannot be page-locked): use inject_recall. Called
  // while the store holds the slot: settle a tentative decode before (truncate_last(0)), since
  // settling can evict and an eviction can wait for the store's writer.
  std::optional<uint32_t> inject_recall_stored(uint64_t id, uint64_t stored_pos,
                                               const StoredKvF16& source, double rotate_keys_by);
  // The memory of a StoredKvF16 region goes away (its store closes).
  void forget_host_region(const void* region) {
    if (compute_) compute_->forget_host_region(region);
  }
  void release_recall(uint64_t id) {
    settle(0);
    ring_.deactivate_recall(id);
  }

 private:
  class Backend;
  friend struct RingSessionFile;  // runtime/session_file.cpp: saves and restores the state
  struct Layer {
    bool sliding = false;
    uint32_t n_slots = 0;  // of the f32 arena: 0 on a bounded layer
    // 64-byte aligned: whole cache lines of rows for the kernels that write them.
    AlignedVector<float> k, v;       // [n_head_kv][n_slots][head_dim]
    AlignedVector<uint16_t> rk, rv;  // global layers: [n_recall][n_head_kv * head_dim] f16
  };
  void check_room(size_t n) const override;
  void run(std::span<const int32_t> tokens, float* all) override;
  void truncate(int k) override { settle(k); }
  void before_decode() override { settle(0); }
  // Offset of head h of recall `slot` in layer il's rk/rv; throws for any other slot.
  size_t recall_row_at(int il, uint32_t slot, int h) const;
  // Throws unless layer il keeps slot's row of head h on the device.
  void check_device_row(int il, uint32_t slot, int h) const;
  // all == nullptr: last logits into logits_; else every token's into all [n][n_vocab].
  // starts: null, or [n] where a span of `type` begins (feed()).
  void run_chunks(std::span<const int32_t> tokens, float* all = nullptr,
                  const uint8_t* starts = nullptr, SpanType type = SpanType::user);
  // Runs a prefix of `tokens` (at least one token) as one forward chunk; returns its length.
  // last: `tokens` ends the run, so a chunk of all of them computes the last logits.
  size_t run_chunk(std::span<const int32_t> tokens, float* all, size_t offset,
                   const uint8_t* starts, SpanType type, bool last);
  void open_pending_span();  // begin_span's span, if any, begins now
  void settle(int k);
  void save_bounded();
  void restore_bounded();

  RingSessionConfig config_;
  SlotRing ring_;
  std::optional<SpanType> pending_span_;  // begin_span: the span the next tokens open
  std::unique_ptr<LocalRing> local_;  // null without sliding layers
  RopeFreqs rope_global_, rope_sliding_;
  std::vector<Layer> layers_;
  BoundedAttention bounded_;  // bounded layers' rings
  std::vector<BoundedSnapshot> probe_saved_;  // [n_layer] bounded states before a probe
  ForwardScratch scratch_;
  std::unique_ptr<Backend> backend_;  // the slot geometry's attention: global, sliding layers
  std::unique_ptr<RingCompute> compute_;  // set: the forward and the K/V are on a device
  std::vector<float> residual_;           // [n_batch][n_embd] a device chunk's residuals
  std::vector<uint16_t> recall_staging_;  // an episode's rows for a device, [n_global][rows]
  std::vector<int> bounded_layers_;       // layer indices
  std::vector<float> bounded_kv_;         // [n_bounded][n_batch][2][kv_dim] from a device
  bool bounded_dirty_ = true;  // the device's bounded rings must be loaded from bounded_
  std::vector<LayerAttention*> layer_attention_;  // [n_layer] backend_ or bounded_
  // Per chunk token, allocated for n_batch tokens once:
  std::vector<uint64_t> clocks_;                // [n_batch]
  std::vector<uint32_t> global_slots_;          // [n_batch]
  std::vector<uint32_t> local_slots_;           // [n_batch]
  std::vector<std::vector<SlotRun>> runs_;      // [n_batch] global runs of each query
  std::vector<SlotRun> local_runs_;             // [n_batch]
  std::vector<float> cs_global_, cs_sliding_;   // [n_batch][n_rot] key rotation cos/sin
  std::vector<SlotAttnScratch> attn_scratch_;   // [n_threads]
  std::vector<uint64_t> distances_;             // [n_batch] max distance of each query
  std::vector<int> segment_end_;                // [n_batch] Backend::segment_end of each token
  std::vector<uint64_t> oldest_;                // [n_batch] oldest window clock each query sees
  std::vector<int> global_layers_;              // layer indices
  std::vector<uint16_t*> recall_k_, recall_v_;  // [n_global] an episode's rows, set per recall
  TokenTap tap_;
  std::vector<float> hidden_;  // [n_batch][n_embd] final-norm rows for the tap
  bool capture_q_ = false;
  std::vector<int> global_index_;  // [n_layer] position in global_layers_, -1 for others
  std::vector<float> queries_;     // [n_batch][n_global][query_dim] with capture_q_
  std::vector<float> tentative_queries_;
  uint64_t max_distance_ = 0;
  EvictionHook hook_;
  bool hook_live_ = true;  // false while a tentative decode_all runs
  // The tentative decode_all: its token count (0: none), and the state before it.
  uint32_t tentative_ = 0;
  SlotRing saved_ring_;
  uint64_t saved_max_distance_ = 0;
  std::vector<uint64_t> tentative_distances_;  // [probe_reserve]
  // What the token tap gets for them: [probe_reserve] each, hidden [probe_reserve][n_embd].
  std::vector<int32_t> tentative_tokens_;
  std::vector<uint64_t> tentative_clocks_;
  std::vector<uint32_t> tentative_slots_;
  std::vector<float> tentative_hidden_;
  std::vector<uint8_t> tentative_starts_;  // [probe_reserve] feed_all's span starts, else 0
  SpanType tentative_type_ = SpanType::user;
  std::vector<float> saved_logits_;  // [n_vocab]
  // feed_all's starts and type for the run() inside its decode_all; null otherwise.
  const uint8_t* feed_all_starts_ = nullptr;
  SpanType feed_all_type_ = SpanType::user;
};

}  // namespace channel
