// Attention of one query head over an explicit list of KV slots: the kernel knows nothing
// about positions, windows or rings; the caller decides which slots a query sees.
//   out = sum_j softmax_j(scale * q.k[slots[j]]) * v[slots[j]]
// K and V of one KV head are slot-major: k[slot * head_dim_k + d], v[slot * head_dim_v + d].
#pragma once

#include <cstdint>
#include <span>

namespace channel {

struct AttentionHead {
  const float* k = nullptr;  // [n_slots][head_dim_k]
  const float* v = nullptr;  // [n_slots][head_dim_v]
  int head_dim_k = 0;
  int head_dim_v = 0;
};

// Obvious scalar version, the reference for tests and the scalar variant; the SIMD variants
// and the dispatching attend() live in backend/cpu/layer_kernels.h. scores: scratch of
// slots.size() floats. An empty slot list gives a zero output.
void attend_ref(const float* q /* [head_dim_k] */, const AttentionHead& kv,
                std::span<const int32_t> slots, float scale, float* scores, float* out
                /* [head_dim_v] */);

// softmax(scale * scores) in place, the sum kept in double (as llama.cpp does): the softmax of
// attend_ref and of every variant of attend.
void softmax_scaled(float* scores, int64_t n, float scale);

}  // namespace channel
