// BoundedState: the per-layer state of a bounded layer — the ring of the last W raw
// (unrotated) keys/values per KV head, the insert counter, and UNDO_DEPTH rows of history
// for speculative rollback — and BoundedSnapshot, a bit-for-bit copy of all of it.
//
// Ring arithmetic: len = min(seen, W); the next write goes to head = seen mod W; the key of
// position j lives in slot j mod W. No absolute position is stored. The size is fixed at
// construction (from the header) and never changes: prefill, decode and turns all share it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace channel {

// Rows of rollback history kept beside the ring: truncate_last(k) works for k ≤ UNDO_DEPTH.
// Bounded by construction; not part of the wire state.
inline constexpr int UNDO_DEPTH = 32;

// Slot of position j in a ring of W slots.
inline int64_t bounded_slot_of(uint64_t pos, int window) {
  return static_cast<int64_t>(pos % static_cast<uint64_t>(window));
}

struct BoundedSnapshot;

class BoundedState {
 public:
  BoundedState() = default;
  BoundedState(int n_kv_heads, int window, int head_dim);

  int n_kv_heads() const { return kvh_; }
  int window() const { return window_; }
  int head_dim() const { return hd_; }
  uint64_t seen() const { return seen_; }
  int len() const {
    return seen_ < static_cast<uint64_t>(window_) ? static_cast<int>(seen_) : window_;
  }
  int head() const { return static_cast<int>(bounded_slot_of(seen_, window_)); }
  int undo_available() const { return undo_len_; }  // how many insertions truncate_last can undo

  const float* key(int kv_head, int64_t slot) const {
    return ring_k_.data() + offset(kv_head, slot);
  }
  const float* value(int kv_head, int64_t slot) const {
    return ring_v_.data() + offset(kv_head, slot);
  }
  const std::vector<float>& ring_k() const { return ring_k_; }  // [kvh][W][hd]
  const std::vector<float>& ring_v() const { return ring_v_; }  // [kvh][W][hd]

  // Stores the raw key/value of position seen() in slot seen mod W (the overwritten slot goes
  // to the undo history) and advances seen.
  void insert(const float* k /*[kvh][hd]*/, const float* v /*[kvh][hd]*/);

  // Forgets the last k insertions, restoring the slots they overwrote. Throws channel::Error
  // (state unchanged) when k is negative, exceeds UNDO_DEPTH or the history still held.
  void truncate_last(int k);

  // Back to the empty state (seen = 0, zero ring, no history); the size is unchanged.
  void clear();

  // Session files: replaces seen and the ring (k, v: [kvh][W][hd] each, as ring_k/ring_v);
  // the undo history empties. Throws channel::Error (state unchanged) on a size mismatch.
  void load_ring(uint64_t seen, const std::vector<float>& k, const std::vector<float>& v);

  BoundedSnapshot snapshot() const;
  // Throws channel::Error (state unchanged) when the snapshot has another geometry.
  void restore(const BoundedSnapshot& snap);

  // Bytes of all buffers (ring + undo history); constant for the life of the state.
  size_t bytes() const;
  // Bit-for-bit equality of everything the operator mutates, history included.
  bool bit_equal(const BoundedState& other) const;
  // Bit-for-bit equality of the wire state only: seen and every ring slot (not the history).
  bool same_ring(const BoundedState& other) const;

 private:
  size_t offset(int kv_head, int64_t slot) const {
    return (static_cast<size_t>(kv_head) * window_ + static_cast<size_t>(slot)) * hd_;
  }

  int kvh_ = 0;
  int window_ = 0;
  int hd_ = 0;
  uint64_t seen_ = 0;
  int undo_len_ = 0;
  std::vector<float> ring_k_;  // [kvh][W][hd]
  std::vector<float> ring_v_;  // [kvh][W][hd]
  // Row r = old contents of the slot overwritten by the insertion of position p, r = p mod
  // UNDO_DEPTH.
  std::vector<float> undo_k_;  // [UNDO_DEPTH][kvh][hd]
  std::vector<float> undo_v_;  // [UNDO_DEPTH][kvh][hd]
};

struct BoundedSnapshot {
  BoundedState state;
};

}  // namespace channel
