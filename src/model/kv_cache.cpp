#include "model/kv_cache.h"

namespace channel {

KvCache::KvCache(const ModelHparams& hp, int n_slots)
    : n_slots_(n_slots),
      n_head_kv_(hp.n_head_kv),
      head_dim_k_(hp.head_dim),
      head_dim_v_(hp.head_dim_v),
      k_(static_cast<size_t>(hp.n_layer) * hp.n_head_kv * n_slots * hp.head_dim),
      v_(static_cast<size_t>(hp.n_layer) * hp.n_head_kv * n_slots * hp.head_dim_v) {}

size_t KvCache::bytes() const {
  return (k_.size() + v_.size()) * sizeof(float);
}

}  // namespace channel
