// The attention implementations of model/forward.h that need nothing but the model (the slot
// ring's is in runtime/ring_session.cpp):
// - ContiguousAttention: the contiguous context over a KvCache. Keys are rotated at their
//   positions with llama.cpp's f32 angles (so logits match llama.cpp) and stored in the slots
//   the caller names; each query attends to the slots the caller says it sees
//   (backend/cpu/layer_kernels.h attend, reference ops/attention.h attend_ref).
// - BoundedAttention: the bounded (swa_sink_v1) layers, each over its fixed-size BoundedState
//   ring of raw keys plus its sinks (bounded/bounded_attention_core.h bounded_attend).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "bounded/bounded_state.h"
#include "model/forward.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "ops/rope.h"

namespace channel {

class ContiguousAttention final : public LayerAttention {
 public:
  // K/V of n_slots slots in every layer; scratch for batches of up to max_batch tokens
  // attended on up to n_threads threads.
  ContiguousAttention(const Model& model, int n_slots, int max_batch, int n_threads);

  // Slots query t (0 <= t < n) of the batch sees on layer il, its own included. Called
  // concurrently from several threads.
  using VisibleSlots = std::function<std::span<const int32_t>(int il, int t)>;
  // The next batch: each token's rope position and the slot that receives its keys and
  // values (n <= max_batch), and what each query sees. The spans and the function must
  // stay valid until the forward ends.
  void set_batch(std::span<const int32_t> positions, std::span<const int32_t> slots,
                 VisibleSlots visible_slots);

  void attend(int il, int n, float* q, float* k, const float* v, float* out,
              ThreadPool& pool) override;

  const KvCache& kv() const { return kv_; }

 private:
  const Model& model_;
  KvCache kv_;
  RopeParams rope_global_, rope_sliding_;
  std::vector<float> angles_global_, angles_sliding_;  // [max_batch][n_rot] cos/sin
  std::vector<float> scores_;                          // [n_threads][n_slots] softmax rows
  std::span<const int32_t> slots_;
  VisibleSlots visible_slots_;
};

class BoundedAttention final : public LayerAttention {
 public:
  // An empty ring for every bounded layer of the model (none for other architectures).
  explicit BoundedAttention(const Model& model);

  // Ring state of bounded layer il; empty states on other layers.
  BoundedState& state(int il) { return states_[static_cast<size_t>(il)]; }
  const BoundedState& state(int il) const { return states_[static_cast<size_t>(il)]; }
  void clear();  // every ring restarts empty
  size_t bytes() const;

  void attend(int il, int n, float* q, float* k, const float* v, float* out,
              ThreadPool& pool) override;

 private:
  const Model& model_;
  std::vector<BoundedState> states_;  // [n_layer]
};

// The attention of each layer of hp: `bounded` for bounded layers, `other` for the rest.
std::vector<LayerAttention*> layer_attention(const ModelHparams& hp, LayerAttention& bounded,
                                             LayerAttention& other);

}  // namespace channel
