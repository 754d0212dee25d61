// SlotRing: clock, tiers, spans, eviction, recall and probes as host integer operations.
#include "kv/slot_ring.h"

#include <algorithm>
#include <numeric>

#include "util/error.h"

namespace channel {

namespace {

uint32_t min_window_of(const RingConfig& c) {
  return 1 + c.probe_reserve;
}

}  // namespace

SlotRing::SlotRing(const RingConfig& config)
    : config_(config), geometry_(config.n_slots, config.n_recall, 0, min_window_of(config)) {
  slot_clock_.assign(config.n_slots, kNoClock);
  identity_.resize(config.n_slots);
  std::iota(identity_.begin(), identity_.end(), 0u);
  episodes_.reserve(config.n_recall);
}

void SlotRing::copy_state_from(const SlotRing& o) {
  if (o.config_.n_slots != config_.n_slots || o.config_.n_recall != config_.n_recall ||
      o.config_.probe_reserve != config_.probe_reserve || o.config_.cut_chunk != config_.cut_chunk)
    throw_error("kv: copy_state_from a ring of another geometry");
  // Vector assignment reuses this ring's buffers when they are large enough.
  geometry_ = o.geometry_;
  sealed_ = o.sealed_;
  probing_ = o.probing_;
  clock_ = o.clock_;
  oldest_ = o.oldest_;
  evicted_spans_ = o.evicted_spans_;
  pending_ = o.pending_;
  open_ = o.open_;
  slot_clock_ = o.slot_clock_;
  identity_ = o.identity_;
  ring_slots_ = o.ring_slots_;
  anchor_spans_ = o.anchor_spans_;
  spans_ = o.spans_;
  span_head_ = o.span_head_;
  span_count_ = o.span_count_;
  episodes_ = o.episodes_;
  recall_used_ = o.recall_used_;
}

const SlotGeometry& SlotRing::geometry() const {
  require_sealed("geometry");
  return geometry_;
}

void SlotRing::require_sealed(const char* what) const {
  if (!sealed_) throw_error("kv: {} needs the anchors sealed (cold boot not finished)", what);
}

uint32_t SlotRing::window_capacity() const {
  return sealed_ ? geometry_.window_size() - config_.probe_reserve : 0;
}

uint32_t SlotRing::free_window() const {
  return sealed_ ? geometry_.window_size() - window_live() : 0;
}

uint32_t SlotRing::cut_chunk() const {
  const uint32_t cap = window_capacity();
  const uint32_t c = config_.cut_chunk ? config_.cut_chunk : cap / 8;
  return std::clamp<uint32_t>(c, 1, std::max<uint32_t>(cap, 1));
}

void SlotRing::begin_span(SpanType type) {
  if (static_cast<unsigned>(type) >= kSpanTypeCount)
    throw_error("kv: span type {} out of range", static_cast<unsigned>(type));
  pending_ = type;
}

void SlotRing::push_span(const SemanticSpan& s) {
  spans_[(span_head_ + span_count_) % spans_.size()] = s;
  ++span_count_;
}

void SlotRing::pop_front_span() {
  span_head_ = (span_head_ + 1) % spans_.size();
  --span_count_;
}

void SlotRing::pop_back_span() {
  --span_count_;
}

uint32_t SlotRing::append_token() {
  if (!pending_ && !open_) throw_error("kv: append_token at clock {} with no span begun", clock_);
  if (!sealed_) {
    const uint32_t limit =
        SlotGeometry::max_anchors(config_.n_slots, config_.n_recall, min_window_of(config_));
    if (clock_ >= limit)
      throw_error(
          "kv: anchors too long for the geometry: anchor token {} does not fit ({} slots - {} "
          "recall leave room for at most {} anchors and a window of {})",
          clock_, config_.n_slots, config_.n_recall, limit, min_window_of(config_));
    const auto slot = static_cast<uint32_t>(clock_);
    if (pending_) {
      anchor_spans_.push_back({*pending_, clock_, clock_, slot, 0});
      pending_.reset();
      open_ = true;
    }
    SemanticSpan& s = anchor_spans_.back();
    ++s.end_clock;
    ++s.slot_count;
    slot_clock_[slot] = clock_++;
    return slot;
  }
  if (probing_) {
    if (free_window() == 0)
      throw_error("kv: probe longer than the free window ({} free slots at clock {})",
                  free_window(), clock_);
  } else {
    while (window_live() >= window_capacity()) evict_front(/*allow_cut=*/!pending_);
  }
  const uint32_t slot = geometry_.slot_of(clock_);
  if (pending_) {
    push_span({*pending_, clock_, clock_, slot, 0});
    pending_.reset();
    open_ = true;
  }
  SemanticSpan& s = back_span();
  ++s.end_clock;
  ++s.slot_count;
  slot_clock_[slot] = clock_++;
  return slot;
}

// evict_front()'s choices replayed without changing anything. Past a cut that leaves part of
// the span (the loop then ends: one slot was enough) it answers true, which only costs a
// caller a shorter run.
bool SlotRing::next_append_evicts_from(uint64_t from) const {
  if (!sealed_ || probing_) return false;
  uint32_t live = window_live();
  const uint32_t cap = window_capacity();
  for (size_t i = 0; live >= cap; ++i) {
    if (i >= span_count_) return true;
    const SemanticSpan& s = window_span(i);
    const bool cut = !pending_ && open_ && span_count_ - i == 1;
    const uint32_t n = cut ? std::min(cut_chunk(), s.slot_count) : s.slot_count;
    if (s.start_clock + n > from) return true;
    if (n < s.slot_count) return live - n >= cap;
    live -= n;
  }
  return false;
}

void SlotRing::seal() {
  if (sealed_) throw_error("kv: anchors already sealed");
  if (probing_) throw_error("kv: cannot seal during a probe");
  geometry_ = SlotGeometry(config_.n_slots, config_.n_recall, static_cast<uint32_t>(clock_),
                           min_window_of(config_));
  sealed_ = true;
  open_ = false;  // window tokens need a span of their own
  oldest_ = clock_;
  const uint32_t w = geometry_.window_size();
  ring_slots_.resize(size_t{2} * w);
  for (uint32_t i = 0; i < 2 * w; ++i) ring_slots_[i] = geometry_.n_sys() + i % w;
  spans_.assign(size_t{w} + 1, SemanticSpan{});
  span_head_ = span_count_ = 0;
}

// Evicts the oldest window span, or cuts a piece off it when it is the open span.
void SlotRing::evict_front(bool allow_cut) {
  SemanticSpan& s = spans_[span_head_];
  const bool cut = allow_cut && open_ && span_count_ == 1;
  const uint32_t n = cut ? std::min(cut_chunk(), s.slot_count) : s.slot_count;
  EvictionEvent ev{{s.span_type, s.start_clock, s.start_clock + n, s.start_slot, n},
                   window_slots(s.start_clock, s.start_clock + n),
                   cut};
  if (hook_) hook_(ev);  // K/V of these slots is still intact here
  for (uint32_t slot : ev.slots) slot_clock_[slot] = kNoClock;
  oldest_ += n;
  ++evicted_spans_;
  if (n < s.slot_count) {
    s.start_clock += n;
    s.start_slot = geometry_.slot_of(s.start_clock);
    s.slot_count -= n;
  } else {
    if (cut) {  // the open span went whole: its type continues in a new span
      pending_ = s.span_type;
      open_ = false;
    }
    pop_front_span();
  }
}

void SlotRing::evict_oldest_span() {
  require_sealed("evict_oldest_span");
  if (probing_) throw_error("kv: cannot evict during a probe");
  if (span_count_ == 0) throw_error("kv: evict_oldest_span with an empty window");
  evict_front(/*allow_cut=*/false);
}

ProbeMark SlotRing::begin_probe() {
  require_sealed("begin_probe");
  if (probing_) throw_error("kv: a probe is already running");
  probing_ = true;
  return {clock_, span_count_, pending_, open_};
}

void SlotRing::rollback_clock(const ProbeMark& saved) {
  if (!probing_) throw_error("kv: rollback_clock without a probe");
  if (saved.clock > clock_ || clock_ - saved.clock > window_live())
    throw_error("kv: rollback_clock to {} from clock {}: not this probe's mark", saved.clock,
                clock_);
  while (clock_ > saved.clock) {
    --clock_;
    slot_clock_[geometry_.slot_of(clock_)] = kNoClock;
    SemanticSpan& s = back_span();
    --s.end_clock;
    if (--s.slot_count == 0) pop_back_span();
  }
  pending_ = saved.pending;
  open_ = saved.open;
  probing_ = false;
}

uint32_t SlotRing::activate_recall(uint64_t id, uint32_t n_tokens, uint64_t stored_pos) {
  require_sealed("activate_recall");
  if (probing_) throw_error("kv: cannot activate recall during a probe");
  if (n_tokens == 0) throw_error("kv: recall episode {} has no tokens", id);
  for (const RecallEpisode& e : episodes_)
    if (e.id == id) throw_error("kv: recall episode {} is already active", id);
  uint32_t at = 0;
  if (!first_fit(n_tokens, &at))
    throw_error(
        "kv: no room for recall episode {} of {} tokens ({} of {} recall slots used, "
        "largest free run {})",
        id, n_tokens, recall_used_, geometry_.n_recall(), recall_free_run());
  episodes_.push_back({id, at, n_tokens, stored_pos});
  recall_used_ += n_tokens;
  for (uint32_t i = 0; i < n_tokens; ++i) slot_clock_[at + i] = stored_pos + i;
  return at;
}

// First fit: the lowest free run of n slots in the recall tier. Candidates are the tier's
// start and each episode's end; scanning them allocates nothing (at most n_recall episodes).
// Returns the largest free run; *at is set when one of n or more exists.
uint32_t SlotRing::scan_recall(uint32_t n, uint32_t* at, bool* found) const {
  uint32_t largest = 0;
  const auto try_at = [&](uint32_t begin) {
    uint32_t end = config_.n_slots;  // the first used slot at or after begin
    for (const RecallEpisode& e : episodes_) {
      if (e.slot_begin <= begin && begin < e.slot_begin + e.count) return;  // inside one
      if (e.slot_begin >= begin) end = std::min(end, e.slot_begin);
    }
    largest = std::max(largest, end - begin);
    if (end - begin >= n && (!*found || begin < *at)) {
      *at = begin;
      *found = true;
    }
  };
  try_at(config_.n_slots - config_.n_recall);
  for (const RecallEpisode& e : episodes_) try_at(e.slot_begin + e.count);
  return largest;
}

bool SlotRing::first_fit(uint32_t n, uint32_t* at) const {
  bool found = false;
  scan_recall(n, at, &found);
  return found;
}

uint32_t SlotRing::recall_free_run() const {
  uint32_t at = 0;
  bool found = false;
  return scan_recall(~0u, &at, &found);
}

void SlotRing::deactivate_recall(uint64_t id) {
  if (probing_) throw_error("kv: cannot deactivate recall during a probe");
  auto it = std::find_if(episodes_.begin(), episodes_.end(),
                         [&](const RecallEpisode& e) { return e.id == id; });
  if (it == episodes_.end()) throw_error("kv: recall episode {} is not active", id);
  for (uint32_t i = 0; i < it->count; ++i) slot_clock_[it->slot_begin + i] = kNoClock;
  recall_used_ -= it->count;
  episodes_.erase(it);
}

void SlotRing::check_write(uint32_t slot) const {
  if (slot >= config_.n_slots)
    throw_error("kv: write to slot {} outside the geometry of {} slots", slot, config_.n_slots);
  if (sealed_ && slot < geometry_.n_sys())
    throw_error("kv: write to anchor slot {}: anchors are immutable", slot);
  if (!slot_live(slot)) throw_error("kv: write to slot {}, which holds no live token", slot);
}

std::span<const uint32_t> SlotRing::anchor_slots() const {
  return {identity_.data(), n_sys()};
}

std::span<const uint32_t> SlotRing::recall_slots(const RecallEpisode& e) const {
  return {identity_.data() + e.slot_begin, e.count};
}

std::span<const uint32_t> SlotRing::window_slots(uint64_t from, uint64_t to) const {
  if (from == to) return {};
  return {ring_slots_.data() + geometry_.ring_index(from), static_cast<size_t>(to - from)};
}

void SlotRing::active_slots(std::vector<uint32_t>& out) const {
  out.clear();
  const auto add = [&](std::span<const uint32_t> s) { out.insert(out.end(), s.begin(), s.end()); };
  add(anchor_slots());
  for (const RecallEpisode& e : episodes_) add(recall_slots(e));
  if (sealed_) add(window_slots());
}

namespace {

struct Fnv {
  uint64_t h = 1469598103934665603ull;
  void bytes(const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  }
  template <typename T>
  void pod(const T& v) {
    bytes(&v, sizeof v);
  }
  void span(const SemanticSpan& s) {
    pod(s.span_type), pod(s.start_clock), pod(s.end_clock), pod(s.start_slot), pod(s.slot_count);
  }
};

std::string describe(const SemanticSpan& s) {
  return fmt::format("{{{} [{}, {}) slot {} x{}}}", span_type_name(s.span_type), s.start_clock,
                     s.end_clock, s.start_slot, s.slot_count);
}

}  // namespace

uint64_t SlotRing::state_checksum() const {
  Fnv f;
  f.pod(config_.n_slots), f.pod(config_.n_recall), f.pod(config_.probe_reserve);
  f.pod(config_.cut_chunk), f.pod(sealed_), f.pod(probing_), f.pod(clock_), f.pod(oldest_);
  f.pod(evicted_spans_), f.pod(open_), f.pod(recall_used_);
  const int pending = pending_ ? static_cast<int>(*pending_) : -1;
  f.pod(pending);
  f.bytes(slot_clock_.data(), slot_clock_.size() * sizeof(uint64_t));
  for (const SemanticSpan& s : anchor_spans_) f.span(s);
  for (size_t i = 0; i < span_count_; ++i) f.span(window_span(i));
  for (const RecallEpisode& e : episodes_)
    f.pod(e.id), f.pod(e.slot_begin), f.pod(e.count), f.pod(e.stored_pos);
  return f.h;
}

std::string state_diff(const SlotRing& a, const SlotRing& b) {
#define CHANNEL_KV_CMP(field) \
  if (a.field != b.field) return fmt::format(#field " differs: {} vs {}", a.field, b.field);
  CHANNEL_KV_CMP(config_.n_slots)
  CHANNEL_KV_CMP(config_.n_recall)
  CHANNEL_KV_CMP(config_.probe_reserve)
  CHANNEL_KV_CMP(config_.cut_chunk)
  CHANNEL_KV_CMP(sealed_)
  CHANNEL_KV_CMP(probing_)
  CHANNEL_KV_CMP(clock_)
  CHANNEL_KV_CMP(oldest_)
  CHANNEL_KV_CMP(evicted_spans_)
  CHANNEL_KV_CMP(open_)
  CHANNEL_KV_CMP(recall_used_)
  CHANNEL_KV_CMP(span_count_)
  CHANNEL_KV_CMP(anchor_spans_.size())
  CHANNEL_KV_CMP(episodes_.size())
#undef CHANNEL_KV_CMP
  if (a.pending_ != b.pending_) return "pending span type differs";
  for (size_t s = 0; s < a.slot_clock_.size(); ++s)
    if (a.slot_clock_[s] != b.slot_clock_[s])
      return fmt::format("slot {} clock differs: {} vs {}", s, a.slot_clock_[s], b.slot_clock_[s]);
  for (size_t i = 0; i < a.anchor_spans_.size(); ++i)
    if (a.anchor_spans_[i] != b.anchor_spans_[i])
      return fmt::format("anchor span {} differs: {} vs {}", i, describe(a.anchor_spans_[i]),
                         describe(b.anchor_spans_[i]));
  for (size_t i = 0; i < a.span_count_; ++i)
    if (a.window_span(i) != b.window_span(i))
      return fmt::format("window span {} differs: {} vs {}", i, describe(a.window_span(i)),
                         describe(b.window_span(i)));
  for (size_t i = 0; i < a.episodes_.size(); ++i)
    if (a.episodes_[i] != b.episodes_[i]) return fmt::format("recall episode {} differs", i);
  return "";
}

}  // namespace channel
