// KvCache: the keys and values of the contiguous context, per layer and KV head, stored by
// slot. It is only storage: which slots a query sees, and at which positions the keys were
// rotated, is decided by its user (model/layer_attention.h ContiguousAttention).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/hparams.h"

namespace channel {

class KvCache {
 public:
  KvCache(const ModelHparams& hp, int n_slots);

  int n_slots() const { return n_slots_; }
  size_t bytes() const;

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
};

}  // namespace channel
