// Virtual positions of the active slots (policy in the header).
#include "kv/virtual_positions.h"

#include "util/error.h"

namespace channel {

QueryView global_runs(const SlotRing& ring, uint64_t query_clock, std::vector<SlotRun>& runs) {
  runs.clear();
  QueryView view;
  if (!ring.sealed()) {
    if (query_clock >= ring.clock())
      throw_error("kv: query clock {} is not written yet (clock {})", query_clock, ring.clock());
    const auto anchors = ring.anchor_slots();
    view.query_pos = static_cast<int64_t>(query_clock);
    view.n_keys = static_cast<uint32_t>(query_clock + 1);
    view.max_distance = query_clock;
    runs.push_back({anchors.data(), view.n_keys, static_cast<double>(query_clock)});
    return view;
  }
  if (query_clock < ring.oldest() || query_clock >= ring.clock())
    throw_error("kv: query clock {} is not a live window token (live [{}, {}))", query_clock,
                ring.oldest(), ring.clock());
  const int64_t a = ring.n_sys();
  const int64_t r = ring.recall_used();
  const int64_t q = a + r + static_cast<int64_t>(query_clock - ring.oldest());
  view.query_pos = q;
  view.max_distance = static_cast<uint64_t>(q);  // the key at virtual 0 (anchor, recall or window)
  const auto anchors = ring.anchor_slots();
  if (!anchors.empty())
    runs.push_back({anchors.data(), static_cast<uint32_t>(anchors.size()), static_cast<double>(q)});
  int64_t base = a;
  for (const RecallEpisode& e : ring.recall_episodes()) {
    const auto s = ring.recall_slots(e);
    // offset = base - stored_pos, rope_pos = q - offset
    runs.push_back(
        {s.data(), e.count, static_cast<double>(q - base) + static_cast<double>(e.stored_pos)});
    base += e.count;
  }
  const auto w = ring.window_slots(ring.oldest(), query_clock + 1);
  runs.push_back({w.data(), static_cast<uint32_t>(w.size()), static_cast<double>(query_clock)});
  view.n_keys = static_cast<uint32_t>(a + r + static_cast<int64_t>(w.size()));
  return view;
}

std::vector<SlotPosition> global_positions(const SlotRing& ring, uint64_t query_clock,
                                           QueryView* view_out) {
  std::vector<SlotRun> runs;
  const QueryView view = global_runs(ring, query_clock, runs);
  if (view_out) *view_out = view;
  std::vector<SlotPosition> out;
  out.reserve(view.n_keys);
  const size_t n_anchor_runs = ring.sealed() && ring.n_sys() > 0 ? 1 : 0;
  for (uint32_t ri = 0; ri < runs.size(); ++ri) {
    const bool window = ring.sealed() ? ri + 1 == runs.size() : false;
    const SlotGroup group = !ring.sealed() || ri < n_anchor_runs ? SlotGroup::anchor
                            : window                             ? SlotGroup::window
                                                                 : SlotGroup::recall;
    for (uint32_t i = 0; i < runs[ri].count; ++i) {
      const uint32_t slot = runs[ri].slots[i];
      const uint64_t stored = ring.slot_clock(slot);
      // What the kernel computes: virtual = query - (rope_pos - stored).
      const auto offset = static_cast<int64_t>(runs[ri].rope_pos) - static_cast<int64_t>(stored);
      out.push_back({slot, group, ri, stored, view.query_pos - offset});
    }
  }
  return out;
}

LocalRing::LocalRing(uint32_t window, uint32_t probe_reserve)
    : window_(window), n_slots_(window + probe_reserve) {
  if (window == 0) throw_error("kv: a sliding-window layer needs a window of at least 1");
  if (uint64_t{window} + probe_reserve > (1u << 30))
    throw_error("kv: sliding window {} + probe reserve {} is too large", window, probe_reserve);
  ring_.resize(size_t{2} * n_slots_);
  for (uint32_t i = 0; i < 2 * n_slots_; ++i) ring_[i] = i % n_slots_;
}

SlotRun LocalRing::run(uint64_t query_clock) const {
  const uint64_t first = query_clock + 1 >= window_ ? query_clock + 1 - window_ : 0;
  return {ring_.data() + slot_of(first), static_cast<uint32_t>(query_clock + 1 - first),
          static_cast<double>(query_clock)};
}

}  // namespace channel
