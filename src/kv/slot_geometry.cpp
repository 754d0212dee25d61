// SlotGeometry: validation of the three-tier partition.
#include "kv/slot_geometry.h"

#include "util/error.h"

namespace channel {

const char* tier_name(Tier tier) {
  switch (tier) {
    case Tier::anchor:
      return "anchor";
    case Tier::window:
      return "window";
    case Tier::recall:
      return "recall";
  }
  return "?";
}

uint32_t SlotGeometry::max_anchors(uint32_t n_slots, uint32_t n_recall, uint32_t min_window) {
  if (n_slots == 0) throw_error("kv: --slots must be at least 1 (got 0)");
  if (n_slots > (1u << 30)) throw_error("kv: --slots {} is too large (max {})", n_slots, 1u << 30);
  if (min_window == 0) min_window = 1;
  if (uint64_t{n_recall} + min_window > n_slots)
    throw_error(
        "kv: {} slots with {} recall slots cannot hold a window of {} slot(s) "
        "(need --slots >= {})",
        n_slots, n_recall, min_window, uint64_t{n_recall} + min_window);
  return n_slots - n_recall - min_window;
}

SlotGeometry::SlotGeometry(uint32_t n_slots, uint32_t n_recall, uint32_t n_sys, uint32_t min_window)
    : n_slots_(n_slots), n_recall_(n_recall), n_sys_(n_sys) {
  const uint32_t limit = max_anchors(n_slots, n_recall, min_window);
  if (n_sys > limit)
    throw_error(
        "kv: anchors of {} tokens are too long for the geometry: {} slots - {} recall leave "
        "room for at most {} anchor tokens and a window of {}",
        n_sys, n_slots, n_recall, limit, min_window == 0 ? 1 : min_window);
}

Tier SlotGeometry::tier_of(uint32_t slot) const {
  if (slot < n_sys_) return Tier::anchor;
  if (slot < window_end()) return Tier::window;
  return Tier::recall;
}

}  // namespace channel
