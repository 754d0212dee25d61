#include "model/kv_cache.h"

namespace channel {

KvCache::KvCache(const ModelHparams& hp, int n_slots)
    : n_slots_(n_slots),
      n_head_kv_(hp.n_head_kv),
      head_dim_k_(hp.head_dim),
      head_dim_v_(hp.head_dim_v),
      k_(static_cast<size_t>(hp.n_layer) * hp.n_head_kv * n_slots * hp.head_dim),
      v_(static_cast<size_t>(hp.n_layer) * hp.n_head_kv * n_slots * hp.head_dim_v),
      bounded_(static_cast<size_t>(hp.n_layer)) {
  for (int il = 0; il < hp.n_layer; ++il) {
    if (hp.is_bounded(il)) bounded(il) = BoundedState(hp.n_head_kv, hp.bounded.window, hp.head_dim);
  }
}

size_t KvCache::bytes() const {
  size_t n = (k_.size() + v_.size()) * sizeof(float);
  for (const BoundedState& b : bounded_) n += b.bytes();
  return n;
}

void KvCache::clear_bounded() {
  for (BoundedState& b : bounded_) {
    if (b.window() > 0) b.clear();
  }
}

}  // namespace channel
