// ContiguousAttention and BoundedAttention: the attention of the contiguous context and of
// bounded layers behind forward()'s LayerAttention.
#include "model/layer_attention.h"

#include <cstring>

#include "backend/cpu/layer_kernels.h"
#include "backend/cpu/thread_pool.h"
#include "bounded/bounded_attention_core.h"

namespace channel {

ContiguousAttention::ContiguousAttention(const Model& model, int n_slots, int max_batch,
                                         int n_threads)
    : model_(model), kv_(model.hparams(), n_slots) {
  const ModelHparams& hp = model.hparams();
  const float* freq_factors =
      model.weights().rope_freqs.empty() ? nullptr : model.weights().rope_freqs.data();
  rope_global_ = {hp.rope_style, hp.n_rot, hp.rope_base, hp.rope_freq_scale, freq_factors};
  rope_sliding_ = {hp.rope_style, hp.n_rot, hp.rope_base_swa, 1.0f, freq_factors};
  angles_global_.resize(static_cast<size_t>(max_batch) * hp.n_rot);
  angles_sliding_.resize(angles_global_.size());
  scores_.resize(static_cast<size_t>(n_threads) * n_slots);
}

void ContiguousAttention::set_batch(std::span<const int32_t> positions,
                                    std::span<const int32_t> slots, VisibleSlots visible_slots) {
  const ModelHparams& hp = model_.hparams();
  for (size_t t = 0; t < positions.size(); ++t) {
    rope_angles(rope_global_, positions[t], angles_global_.data() + t * hp.n_rot);
    if (hp.sliding_window > 0)
      rope_angles(rope_sliding_, positions[t], angles_sliding_.data() + t * hp.n_rot);
  }
  slots_ = slots;
  visible_slots_ = std::move(visible_slots);
}

void ContiguousAttention::attend(int il, int n, float* q, float* k, const float* v, float* out,
                                 ThreadPool& pool) {
  const ModelHparams& hp = model_.hparams();
  const int64_t hd = hp.head_dim, hdv = hp.head_dim_v;
  const int64_t q_dim = hp.n_head * hd, kv_dim = hp.n_head_kv * hd, v_dim = hp.n_head_kv * hdv;
  const int group = hp.n_head / hp.n_head_kv;  // query heads per KV head
  const bool sliding = hp.is_sliding(il);
  const RopeParams& rope = sliding ? rope_sliding_ : rope_global_;
  const float* angles = sliding ? angles_sliding_.data() : angles_global_.data();

  pool.parallel_for(n, [&](int64_t begin, int64_t end, int) {
    for (int64_t t = begin; t < end; ++t) {
      rope_apply(rope, angles + t * hp.n_rot, q + t * q_dim, hp.n_head, static_cast<int>(hd));
      rope_apply(rope, angles + t * hp.n_rot, k + t * kv_dim, hp.n_head_kv, static_cast<int>(hd));
    }
  });

  // Store this batch's keys/values in their slots; queries then see them like any other.
  for (int t = 0; t < n; ++t) {
    const int64_t slot = slots_[static_cast<size_t>(t)];
    for (int h = 0; h < hp.n_head_kv; ++h) {
      std::memcpy(kv_.k(il, h) + slot * hd, k + t * kv_dim + h * hd, sizeof(float) * hd);
      std::memcpy(kv_.v(il, h) + slot * hdv, v + t * v_dim + h * hdv, sizeof(float) * hdv);
    }
  }

  // One task per (query token, query head).
  const int64_t n_slots = kv_.n_slots();
  pool.parallel_for(static_cast<int64_t>(n) * hp.n_head, [&](int64_t begin, int64_t end,
                                                             int thread) {
    float* scores = scores_.data() + static_cast<int64_t>(thread) * n_slots;  // [n_slots]
    for (int64_t task = begin; task < end; ++task) {
      const int t = static_cast<int>(task / hp.n_head), h = static_cast<int>(task % hp.n_head);
      const int hk = h / group;
      const AttentionHead head{kv_.k(il, hk), kv_.v(il, hk), static_cast<int>(hd),
                               static_cast<int>(hdv)};
      channel::attend(q + t * q_dim + h * hd, head, visible_slots_(il, t), hp.attn_scale, scores,
                   out + t * hp.n_head * hdv + h * hdv);
    }
  });
}

BoundedAttention::BoundedAttention(const Model& model)
    : model_(model), states_(static_cast<size_t>(model.hparams().n_layer)) {
  const ModelHparams& hp = model.hparams();
  for (int il = 0; il < hp.n_layer; ++il)
    if (hp.is_bounded(il)) state(il) = BoundedState(hp.n_head_kv, hp.bounded.window, hp.head_dim);
}

void BoundedAttention::clear() {
  for (BoundedState& b : states_)
    if (b.window() > 0) b.clear();
}

size_t BoundedAttention::bytes() const {
  size_t n = 0;
  for (const BoundedState& b : states_) n += b.bytes();
  return n;
}

void BoundedAttention::attend(int il, int n, float* q, float* k, const float* v, float* out,
                              ThreadPool& pool) {
  const BoundedSinks& sinks = model_.weights().layers[static_cast<size_t>(il)].sinks;
  bounded_attend(model_.weights().bounded_cfg, sinks.k.data(), sinks.v.data(), state(il), q, k, v,
                 n, out, &pool);
}

std::vector<LayerAttention*> layer_attention(const ModelHparams& hp, LayerAttention& bounded,
                                             LayerAttention& other) {
  std::vector<LayerAttention*> layers(static_cast<size_t>(hp.n_layer));
  for (int il = 0; il < hp.n_layer; ++il)
    layers[static_cast<size_t>(il)] = hp.is_bounded(il) ? &bounded : &other;
  return layers;
}

}  // namespace channel
