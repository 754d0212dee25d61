// SlotGeometry: the fixed three-tier partition of a session's KV slots and the ring
// arithmetic over it, as pure functions (no state beyond the three sizes).
//
//   [0, n_sys)                      tier 1, anchors: the cold-boot prefill, immutable
//   [n_sys, n_slots - n_recall)     tier 2, the FIFO window (a ring)
//   [n_slots - n_recall, n_slots)   tier 3, recall slots (episodic memory)
//
// Clocks count every token since cold boot; anchors hold clocks 0..n_sys-1 at slot == clock.
#pragma once

#include <cstdint>

namespace channel {

enum class Tier : uint8_t { anchor = 1, window = 2, recall = 3 };

const char* tier_name(Tier tier);

class SlotGeometry {
 public:
  static constexpr uint32_t kDefaultSlots = 4096;
  static constexpr uint32_t kDefaultRecall = 256;

  // Throws channel::Error when the counts cannot hold anchors plus a window of at least
  // `min_window` slots (n_slots 0, recall slots eating everything, anchors too long).
  SlotGeometry(uint32_t n_slots, uint32_t n_recall, uint32_t n_sys, uint32_t min_window = 1);

  // The most anchors that still leave `min_window` window slots: a cold boot longer than
  // this is an error. Throws when even zero anchors do not fit.
  static uint32_t max_anchors(uint32_t n_slots, uint32_t n_recall, uint32_t min_window = 1);

  uint32_t n_slots() const { return n_slots_; }
  uint32_t n_recall() const { return n_recall_; }
  uint32_t n_sys() const { return n_sys_; }
  uint32_t window_begin() const { return n_sys_; }
  uint32_t window_end() const { return n_slots_ - n_recall_; }  // exclusive
  uint32_t window_size() const { return window_end() - n_sys_; }
  uint32_t recall_begin() const { return window_end(); }
  uint32_t recall_end() const { return n_slots_; }  // exclusive

  Tier tier_of(uint32_t slot) const;  // slot < n_slots

  // The physical slot of the token written at `clock`:
  //   clock <  n_sys:  slot = clock                                   (anchors)
  //   clock >= n_sys:  slot = n_sys + ((clock - n_sys) mod (n_slots - n_recall - n_sys))
  // so the write pointer cycles through the window and never enters tier 1 or tier 3.
  uint32_t slot_of(uint64_t clock) const {
    if (clock < n_sys_) return static_cast<uint32_t>(clock);
    return n_sys_ + static_cast<uint32_t>((clock - n_sys_) % window_size());
  }

  // Index of `clock`'s slot within the window, (clock - n_sys) mod window_size; clock >= n_sys.
  uint32_t ring_index(uint64_t clock) const {
    return static_cast<uint32_t>((clock - n_sys_) % window_size());
  }

 private:
  uint32_t n_slots_;
  uint32_t n_recall_;
  uint32_t n_sys_;
};

}  // namespace channel
