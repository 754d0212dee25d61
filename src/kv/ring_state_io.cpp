// SlotRing state bytes: writer, and a reader that checks every field (layout in the header).
#include "kv/ring_state_io.h"

#include <cstring>

#include "util/bytes.h"
#include "util/error.h"

namespace channel {

namespace {

constexpr uint32_t kVersion = 1;

void put_span(ByteWriter& w, const SemanticSpan& s) {
  w.put<uint8_t>(static_cast<uint8_t>(s.span_type));
  w.put<uint8_t>(0), w.put<uint8_t>(0), w.put<uint8_t>(0);
  w.put(s.start_clock), w.put(s.end_clock), w.put(s.start_slot), w.put(s.slot_count);
}

SemanticSpan read_span(ByteReader& r) {
  const size_t at = r.at;
  SemanticSpan s;
  const auto type = r.get<uint8_t>("span type");
  if (type >= kSpanTypeCount) r.fail(at, fmt::format("span type {} out of range", type));
  s.span_type = static_cast<SpanType>(type);
  for (int i = 0; i < 3; ++i)
    if (r.get<uint8_t>("span padding") != 0) r.fail(at + 1, "non-zero span padding");
  s.start_clock = r.get<uint64_t>("span start_clock");
  s.end_clock = r.get<uint64_t>("span end_clock");
  s.start_slot = r.get<uint32_t>("span start_slot");
  s.slot_count = r.get<uint32_t>("span slot_count");
  if (s.slot_count == 0 || s.end_clock < s.start_clock ||
      s.end_clock - s.start_clock != s.slot_count)
    r.fail(at, fmt::format("span [{}, {}) with slot_count {} is inconsistent", s.start_clock,
                           s.end_clock, s.slot_count));
  return s;
}

}  // namespace

std::vector<uint8_t> save_ring_state(const SlotRing& ring) {
  if (ring.probing_) throw_error("kv: cannot save the state during a probe");
  ByteWriter w;
  w.out.insert(w.out.end(), {'C', 'H', 'K', 'V'});
  w.put(kVersion);
  const RingConfig& c = ring.config_;
  w.put(c.n_slots), w.put(c.n_recall), w.put(c.probe_reserve), w.put(c.cut_chunk);
  w.put<uint8_t>(ring.sealed_), w.put<uint8_t>(ring.open_);
  w.put<int8_t>(ring.pending_ ? static_cast<int8_t>(*ring.pending_) : int8_t{-1});
  w.put<uint8_t>(0);
  w.put(ring.clock_), w.put(ring.oldest_), w.put(ring.evicted_spans_);
  w.put(static_cast<uint32_t>(ring.anchor_spans_.size()));
  w.put(static_cast<uint32_t>(ring.span_count_));
  w.put(static_cast<uint32_t>(ring.episodes_.size()));
  for (const SemanticSpan& s : ring.anchor_spans_) put_span(w, s);
  for (size_t i = 0; i < ring.span_count_; ++i) put_span(w, ring.window_span(i));
  for (const RecallEpisode& e : ring.episodes_)
    w.put(e.id), w.put(e.slot_begin), w.put(e.count), w.put(e.stored_pos);
  return w.out;
}

SlotRing load_ring_state(std::span<const uint8_t> bytes, std::string_view what,
                         const RingConfig* expected) {
  ByteReader r{bytes, fmt::format("{}: kv state", what)};
  if (bytes.size() < 4 || std::memcmp(bytes.data(), "CHKV", 4) != 0)
    r.fail(0, "bad magic (expected CHKV)");
  r.at = 4;
  if (const auto v = r.get<uint32_t>("version"); v != kVersion)
    r.fail(4, fmt::format("unsupported version {}", v));
  RingConfig c;
  c.n_slots = r.get<uint32_t>("n_slots");
  c.n_recall = r.get<uint32_t>("n_recall");
  c.probe_reserve = r.get<uint32_t>("probe_reserve");
  c.cut_chunk = r.get<uint32_t>("cut_chunk");
  if (expected &&
      (c.n_slots != expected->n_slots || c.n_recall != expected->n_recall ||
       c.probe_reserve != expected->probe_reserve || c.cut_chunk != expected->cut_chunk))
    r.fail(8, fmt::format("geometry {}/{}/{}/{} (slots/recall/reserve/cut) does not match the "
                          "session's {}/{}/{}/{}",
                          c.n_slots, c.n_recall, c.probe_reserve, c.cut_chunk, expected->n_slots,
                          expected->n_recall, expected->probe_reserve, expected->cut_chunk));
  SlotRing ring = [&] {
    try {
      return SlotRing(c);
    } catch (const Error& e) {
      r.fail(8, e.what());
    }
  }();
  const size_t flags_at = r.at;
  const auto sealed = r.get<uint8_t>("sealed");
  const auto open = r.get<uint8_t>("open");
  const auto pending = r.get<int8_t>("pending");
  if (sealed > 1 || open > 1 || r.get<uint8_t>("padding") != 0) r.fail(flags_at, "bad flags");
  if (pending < -1 || pending >= kSpanTypeCount)
    r.fail(flags_at + 2, fmt::format("pending span type {} out of range", pending));
  const size_t clocks_at = r.at;
  const auto clock = r.get<uint64_t>("clock");
  const auto oldest = r.get<uint64_t>("oldest");
  const auto evicted = r.get<uint64_t>("evicted_spans");
  const auto n_anchor_spans = r.get<uint32_t>("n_anchor_spans");
  const auto n_window_spans = r.get<uint32_t>("n_window_spans");
  const auto n_episodes = r.get<uint32_t>("n_episodes");

  // Anchors: spans tile [0, n_sys) with slot == clock.
  uint64_t next = 0;
  const uint64_t max_anchors =
      SlotGeometry::max_anchors(c.n_slots, c.n_recall, 1 + c.probe_reserve);
  if (n_anchor_spans > max_anchors) r.fail(r.at, "too many anchor spans");
  for (uint32_t i = 0; i < n_anchor_spans; ++i) {
    const size_t at = r.at;
    const SemanticSpan s = read_span(r);
    if (s.start_clock != next || s.start_slot != s.start_clock || s.end_clock > max_anchors)
      r.fail(at, fmt::format("anchor span {} does not continue the anchors at clock {}", i, next));
    next = s.end_clock;
    ring.anchor_spans_.push_back(s);
  }
  const uint64_t n_sys = next;
  ring.sealed_ = sealed;
  ring.clock_ = clock;
  ring.oldest_ = oldest;
  ring.evicted_spans_ = evicted;
  ring.open_ = open;
  if (pending >= 0) ring.pending_ = static_cast<SpanType>(pending);
  if (!sealed) {
    if (clock != n_sys || oldest != 0 || n_window_spans != 0 || n_episodes != 0 || evicted != 0)
      r.fail(clocks_at, "an unsealed state holds anchors only");
    if (open && n_anchor_spans == 0) r.fail(flags_at, "open span flag with no span");
    for (uint64_t i = 0; i < n_sys; ++i) ring.slot_clock_[i] = i;
  } else {
    ring.sealed_ = false;  // seal() rebuilds the window tables for N_sys anchors
    ring.clock_ = n_sys;
    ring.seal();
    ring.clock_ = clock;
    ring.oldest_ = oldest;
    ring.open_ = open;
    const SlotGeometry& g = ring.geometry_;
    for (uint64_t i = 0; i < n_sys; ++i) ring.slot_clock_[i] = i;
    if (oldest < n_sys || clock < oldest || clock - oldest > g.window_size())
      r.fail(clocks_at, fmt::format("live window [{}, {}) does not fit a window of {} after {} "
                                    "anchors",
                                    oldest, clock, g.window_size(), n_sys));
    if (n_window_spans > g.window_size()) r.fail(r.at, "too many window spans");
    next = oldest;
    for (uint32_t i = 0; i < n_window_spans; ++i) {
      const size_t at = r.at;
      const SemanticSpan s = read_span(r);
      if (s.start_clock != next || s.end_clock > clock || s.start_slot != g.slot_of(s.start_clock))
        r.fail(at, fmt::format("window span {} does not continue the window at clock {}", i, next));
      next = s.end_clock;
      ring.push_span(s);
    }
    if (next != clock)
      r.fail(r.at, fmt::format("window spans end at {}, not at clock {}", next, clock));
    if (open && n_window_spans == 0) r.fail(flags_at, "open span flag with no window span");
    for (uint64_t t = oldest; t < clock; ++t) ring.slot_clock_[g.slot_of(t)] = t;
    if (n_episodes > c.n_recall) r.fail(r.at, "too many recall episodes");
    for (uint32_t i = 0; i < n_episodes; ++i) {
      const size_t at = r.at;
      RecallEpisode e;
      e.id = r.get<uint64_t>("episode id");
      e.slot_begin = r.get<uint32_t>("episode slot_begin");
      e.count = r.get<uint32_t>("episode count");
      e.stored_pos = r.get<uint64_t>("episode stored_pos");
      if (e.count == 0 || e.slot_begin < g.recall_begin() || e.slot_begin > g.recall_end() ||
          e.count > g.recall_end() - e.slot_begin || e.stored_pos > ~uint64_t{0} / 2)
        r.fail(at, fmt::format("recall episode {} outside the recall tier", e.id));
      for (const RecallEpisode& o : ring.episodes_)
        if (o.id == e.id ||
            (e.slot_begin < o.slot_begin + o.count && o.slot_begin < e.slot_begin + e.count))
          r.fail(at, fmt::format("recall episode {} overlaps episode {}", e.id, o.id));
      ring.episodes_.push_back(e);
      ring.recall_used_ += e.count;
      for (uint32_t j = 0; j < e.count; ++j) ring.slot_clock_[e.slot_begin + j] = e.stored_pos + j;
    }
  }
  if (r.at != bytes.size()) r.fail(r.at, fmt::format("{} trailing bytes", bytes.size() - r.at));
  return ring;
}

}  // namespace channel
