// SlotRing: one session's KV slot state on the host, all integers. It owns the clock, the
// three tiers (slot_geometry.h), which slots are live and the clock (stored RoPE position)
// of each, the semantic spans of the window and their eviction, the recall episodes, and
// probes with rollback. It never touches K/V bytes: callers write K/V into the slot that
// append_token() returns, and kernels read through the views below.
//
// Eviction rule (docs/kv-geometry.md): before a window token is written while the window
// holds `window_capacity()` live tokens, the oldest span is evicted whole, repeatedly, until
// a slot is free. If the oldest span is the open span (it fills the whole window), its
// oldest `cut_chunk` tokens are cut off and evicted as one piece. Every eviction calls the
// hook with the span (or piece) and its slots, while their K/V is still intact.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kv/slot_geometry.h"
#include "kv/span.h"

namespace channel {

struct RingConfig {
  uint32_t n_slots = SlotGeometry::kDefaultSlots;    // --slots
  uint32_t n_recall = SlotGeometry::kDefaultRecall;  // --recall-slots
  // Window slots kept free for probes: eviction starts once the window holds
  // window_size - probe_reserve live tokens. 0 keeps the spec's geometry exactly.
  uint32_t probe_reserve = 0;
  // Tokens cut at a time from a span that fills the whole window; 0 = max(1, capacity / 8).
  uint32_t cut_chunk = 0;
};

// What the eviction hook receives. `slots[i]` held clock span.start_clock + i.
struct EvictionEvent {
  SemanticSpan span;
  std::span<const uint32_t> slots;
  bool cut = false;  // a piece cut from the front of the open span, which continues
};
using EvictionHook = std::function<void(const EvictionEvent&)>;

// A recalled episode in tier 3: `count` consecutive recall slots from `slot_begin`, whose
// keys were stored rotated at positions stored_pos, stored_pos + 1, ...
struct RecallEpisode {
  uint64_t id = 0;
  uint32_t slot_begin = 0;
  uint32_t count = 0;
  uint64_t stored_pos = 0;
  bool operator==(const RecallEpisode&) const = default;
};

// What rollback_clock() restores. Obtained from begin_probe().
struct ProbeMark {
  uint64_t clock = 0;
  size_t window_spans = 0;
  std::optional<SpanType> pending;
  bool open = false;
};

class SlotRing {
 public:
  static constexpr uint64_t kNoClock = ~uint64_t{0};  // slot_clock() of a free slot

  explicit SlotRing(const RingConfig& config = {});

  void set_eviction_hook(EvictionHook hook) { hook_ = std::move(hook); }
  const RingConfig& config() const { return config_; }
  // Becomes a copy of `other`'s state (everything state_diff compares), keeping its own hook.
  // Throws for another config. No allocation once this ring has held a state that large.
  void copy_state_from(const SlotRing& other);

  // --- writing tokens ---------------------------------------------------------------
  // The next append_token() starts a new span of `type`.
  void begin_span(SpanType type);
  // Claims the slot for the token at clock(), evicting as needed; returns the slot whose
  // K/V the caller writes next. Before seal() the token is an anchor (slot == clock).
  // Throws channel::Error (state unchanged) with no span begun, when the anchors would no
  // longer leave a window, or in a probe when the window has no free slot.
  uint32_t append_token();
  // Ends the cold boot: the anchors written so far (N_sys of them) become immutable and
  // the window starts at slot N_sys. Throws if already sealed.
  void seal();
  bool sealed() const { return sealed_; }
  // Whether the next append_token() would evict a token at clock `from` or later (never
  // before seal() or in a probe). A caller that writes the K/V of a run of tokens after
  // appending all of them stops the run before such a token: its K/V is not written yet.
  bool next_append_evicts_from(uint64_t from) const;

  // Evicts the oldest whole window span now (hook called). Throws when the window is empty
  // or during a probe.
  void evict_oldest_span();

  // --- probes -----------------------------------------------------------------------
  // Tokens appended until rollback_clock() are transient. They never evict: a probe token
  // without a free window slot is an error (see free_window()).
  ProbeMark begin_probe();
  // Deactivates the transient slots newest first and restores clock and spans: O(k) in
  // the number of transient tokens, no K/V written.
  void rollback_clock(const ProbeMark& saved);
  bool probing() const { return probing_; }

  // --- recall tier ------------------------------------------------------------------
  // Reserves `n_tokens` consecutive recall slots (first fit) for episode `id` and marks
  // them live with stored positions stored_pos + i; returns the first slot. The caller
  // then writes the episode's K/V there. Throws when there is no room or the id is active.
  uint32_t activate_recall(uint64_t id, uint32_t n_tokens, uint64_t stored_pos);
  void deactivate_recall(uint64_t id);
  // In activation order (the order of their virtual positions).
  std::span<const RecallEpisode> recall_episodes() const { return episodes_; }
  uint32_t recall_used() const { return recall_used_; }
  uint32_t recall_free_run() const;  // the longest episode activate_recall can take now

  // --- state ------------------------------------------------------------------------
  uint64_t clock() const { return clock_; }    // tokens written; the next token's clock
  uint64_t oldest() const { return oldest_; }  // oldest live window clock (== clock if none)
  uint32_t n_sys() const { return sealed_ ? geometry_.n_sys() : static_cast<uint32_t>(clock_); }
  const SlotGeometry& geometry() const;  // throws before seal()
  uint32_t window_live() const { return static_cast<uint32_t>(clock_ - oldest_); }
  uint32_t window_capacity() const;  // window_size - probe_reserve
  uint32_t free_window() const;      // free window slots: the longest probe possible now
  uint32_t cut_chunk() const;
  uint64_t evicted_spans() const { return evicted_spans_; }

  bool slot_live(uint32_t slot) const { return slot_clock_[slot] != kNoClock; }
  uint64_t slot_clock(uint32_t slot) const { return slot_clock_[slot]; }
  // Throws unless K/V may be written to `slot` now: in range, not a sealed anchor, live.
  void check_write(uint32_t slot) const;

  // Spans: anchors (fixed after seal) and the live window spans, oldest first.
  std::span<const SemanticSpan> anchor_spans() const { return anchor_spans_; }
  size_t window_span_count() const { return span_count_; }
  const SemanticSpan& window_span(size_t i) const {
    return spans_[(span_head_ + i) % spans_.size()];
  }

  // --- the active-slot table, as runs of slot indices (no copies) -------------------
  std::span<const uint32_t> anchor_slots() const;
  std::span<const uint32_t> recall_slots(const RecallEpisode& e) const;
  // Live window slots for clocks [from, to), oldest first; requires oldest <= from <= to <= clock.
  std::span<const uint32_t> window_slots(uint64_t from, uint64_t to) const;
  std::span<const uint32_t> window_slots() const { return window_slots(oldest_, clock_); }
  // The whole table flattened: [anchors][recall episodes in order][window oldest first].
  void active_slots(std::vector<uint32_t>& out) const;

  // Bit-exact comparison of everything above (not the hook): "" when equal, else the
  // first difference in words. state_checksum() is FNV-1a over the same fields.
  friend std::string state_diff(const SlotRing& a, const SlotRing& b);
  uint64_t state_checksum() const;

  // ring_state_io.h
  friend std::vector<uint8_t> save_ring_state(const SlotRing& ring);
  friend SlotRing load_ring_state(std::span<const uint8_t> bytes, std::string_view what,
                                  const RingConfig* expected);

 private:
  void require_sealed(const char* what) const;
  void evict_front(bool allow_cut);
  uint32_t scan_recall(uint32_t n, uint32_t* at, bool* found) const;
  bool first_fit(uint32_t n, uint32_t* at) const;
  SemanticSpan& back_span() { return spans_[(span_head_ + span_count_ - 1) % spans_.size()]; }
  void push_span(const SemanticSpan& s);
  void pop_front_span();
  void pop_back_span();

  RingConfig config_;
  SlotGeometry geometry_;  // meaningful after seal()
  bool sealed_ = false;
  bool probing_ = false;
  uint64_t clock_ = 0;
  uint64_t oldest_ = 0;
  uint64_t evicted_spans_ = 0;
  std::optional<SpanType> pending_;         // begin_span() not yet consumed by a token
  bool open_ = false;                       // the newest span takes more tokens
  std::vector<uint64_t> slot_clock_;        // [n_slots] stored position, kNoClock if free
  std::vector<uint32_t> identity_;          // [n_slots] i: anchor and recall runs
  std::vector<uint32_t> ring_slots_;        // [2 * window_size] n_sys + i mod window_size
  std::vector<SemanticSpan> anchor_spans_;  // cold-boot spans, immutable after seal
  std::vector<SemanticSpan> spans_;         // [window_size + 1] ring of live window spans
  size_t span_head_ = 0;
  size_t span_count_ = 0;
  std::vector<RecallEpisode> episodes_;  // activation order, capacity n_recall
  uint32_t recall_used_ = 0;
  EvictionHook hook_;
};

}  // namespace channel
