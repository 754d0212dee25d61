// Virtual positions: where attention sees each active slot, so that no query-key distance
// exceeds the geometry however long the stream runs (a model only handles distances it was
// trained on, so the distances must stay bounded).
//
// Keys are stored rotated at their stored position (a window or anchor token at its clock,
// a recalled token at the position its episode was stored with). The slots a query sees
// form groups; each group has one offset, virtual = stored + offset, and the groups are
// laid out contiguously, ending at the query (A = N_sys anchors, R = live recall tokens):
//
//   anchors   a = 0 .. A-1              virtual a
//   recall    episode e, token i        virtual A + (tokens of episodes before e) + i
//   window    clock c in [oldest, t]    virtual A + R + (c - oldest)
//   query     clock t                   virtual A + R + (t - oldest)
//
// so every distance is <= A + R + window_capacity - 1 < n_slots. Because
// R(p_q) q . R(s_k + off) k = R(p_q - off) q . R(s_k) k, attention rotates the QUERY once
// per group by rope_pos = p_q - off and dots it with the stored keys: sliding the window
// changes integers only, no key is ever re-rotated. The window group's rope_pos is simply t.
// Before seal() a query at anchor clock t sees anchors 0..t at their clocks.
//
// Sliding-window layers were trained on true distances inside their window, so they use
// LocalRing instead: they see exactly the last W
// tokens by clock (anchors included while they are that recent, recall never), at their
// true distances t - c < W.
#pragma once

#include <cstdint>
#include <vector>

#include "kv/slot_ring.h"

namespace channel {

// A run of the active-slot table whose keys share one query rotation.
struct SlotRun {
  const uint32_t* slots = nullptr;
  uint32_t count = 0;
  double rope_pos = 0;  // rotate the query by this position for these keys
};

enum class SlotGroup : uint8_t { anchor, recall, window };

struct SlotPosition {
  uint32_t slot = 0;
  SlotGroup group = SlotGroup::window;
  uint32_t run = 0;         // index into the runs of the same query
  uint64_t stored_pos = 0;  // the key was rotated at this position when written
  int64_t virtual_pos = 0;  // where the query sees it
  bool operator==(const SlotPosition&) const = default;
};

struct QueryView {
  int64_t query_pos = 0;      // the query's virtual position
  uint32_t n_keys = 0;        // keys visible
  uint64_t max_distance = 0;  // largest query - key virtual distance (0 with no keys)
};

// Global layers: the runs a query at `query_clock` attends over, in table order
// [anchors][recall episodes in activation order][window]. query_clock must be a token the
// ring holds: before seal any clock < clock(); after seal a live window clock
// (oldest <= query_clock < clock), seeing the window up to and including itself.
// `runs` is cleared and refilled (no allocation once it has capacity n_recall + 2).
QueryView global_runs(const SlotRing& ring, uint64_t query_clock, std::vector<SlotRun>& runs);

// The same view expanded per slot: each visible slot with its group, stored and virtual
// position. For tests, stats and the oracle comparison.
std::vector<SlotPosition> global_positions(const SlotRing& ring, uint64_t query_clock,
                                           QueryView* view = nullptr);

// Slots of a sliding-window layer: W visible tokens plus probe_reserve spare slots, so a
// probe of up to probe_reserve tokens never overwrites a token the next query needs.
// Every token (anchor or window) is written at slot_of(clock) = clock mod (W + reserve).
class LocalRing {
 public:
  explicit LocalRing(uint32_t window, uint32_t probe_reserve = 0);
  uint32_t window() const { return window_; }
  uint32_t n_slots() const { return n_slots_; }
  uint32_t slot_of(uint64_t clock) const { return static_cast<uint32_t>(clock % n_slots_); }
  // Clocks max(0, t - W + 1) .. t, oldest first, rope_pos = t (keys stored at their clock).
  SlotRun run(uint64_t query_clock) const;

 private:
  uint32_t window_;
  uint32_t n_slots_;
  std::vector<uint32_t> ring_;  // [2 * n_slots] i mod n_slots
};

}  // namespace channel
