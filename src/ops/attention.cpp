#include "ops/attention.h"

#include <cmath>

namespace channel {

void softmax_scaled(float* scores, int64_t n, float scale) {
  float max = -INFINITY;
  for (int64_t j = 0; j < n; ++j) {
    scores[j] *= scale;
    if (scores[j] > max) max = scores[j];
  }
  double sum = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    scores[j] = std::exp(scores[j] - max);
    sum += scores[j];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t j = 0; j < n; ++j) scores[j] *= inv;
}

void attend_ref(const float* q, const AttentionHead& kv, std::span<const int32_t> slots,
                float scale, float* scores, float* out) {
  const int64_t n = static_cast<int64_t>(slots.size());
  for (int64_t j = 0; j < n; ++j) {
    const float* k = kv.k + static_cast<int64_t>(slots[j]) * kv.head_dim_k;
    float s = 0.0f;
    for (int d = 0; d < kv.head_dim_k; ++d) s += q[d] * k[d];
    scores[j] = s;
  }
  for (int d = 0; d < kv.head_dim_v; ++d) out[d] = 0.0f;
  if (n == 0) return;
  softmax_scaled(scores, n, scale);
  for (int64_t j = 0; j < n; ++j) {
    const float* v = kv.v + static_cast<int64_t>(slots[j]) * kv.head_dim_v;
    for (int d = 0; d < kv.head_dim_v; ++d) out[d] += scores[j] * v[d];
  }
}

}  // namespace channel
