// KvCache: the keys and values of one session, per layer and KV head, stored by slot.
// It is only storage: which slots a query sees, and at which positions the keys were
// rotated, is decided by the session (ForwardBatch::visible_slots), so a ring or an
// active-slot table can sit on top without moving any K/V bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "bounded/bounded_state.h"
#include "model/hparams.h"

namespace channel {

class KvCache {
 public:
  KvCache(const ModelHparams& hp, int n_slots);

  int n_slots() const { return n_slots_; }
  size_t bytes() const;

  // Ring state of bounded layer il (bounded architecture); fixed size, see bounded_state.h.
  BoundedState& bounded(int layer) { return bounded_[static_cast<size_t>(layer)]; }
  const BoundedState& bounded(int layer) const { return bounded_[static_cast<size_t>(layer)]; }
  void clear_bounded();

  // [n_slots][head_dim] keys of one KV head of one layer (already normed and rotated).
  float* k(int layer, int kv_head) { return k_.data() + offset(layer, kv_head, head_dim_k_); }
  const float* k(int layer, int kv_head) const {
    return k_.data() + offset(layer, kv_head, head_dim_k_);
  }
  // [n_slots][head_dim_v] values of one KV head of one layer.
  float* v(int layer, int kv_head) { return v_.data() + offset(layer, kv_head, head_dim_v_); }
  const float* v(int layer, int kv_head) const {
    return v_.data() + offset(layer, kv_head, head_dim_v_);
  }

 private:
  size_t offset(int layer, int kv_head, int dim) const {
    return (static_cast<size_t>(layer) * n_head_kv_ + kv_head) * n_slots_ * dim;
  }

  int n_slots_, n_head_kv_, head_dim_k_, head_dim_v_;
  std::vector<float> k_;               // [n_layer][n_head_kv][n_slots][head_dim_k]
  std::vector<float> v_;               // [n_layer][n_head_kv][n_slots][head_dim_v]
  std::vector<BoundedState> bounded_;  // [n_layer]; empty states on non-bounded layers
};

}  // namespace channel
