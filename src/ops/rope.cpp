#include "ops/rope.h"

#include <cmath>

namespace channel {

void rope_angles(const RopeParams& p, int32_t pos, float* cos_sin) {
  const float theta_scale = std::pow(p.base, -2.0f / static_cast<float>(p.n_rot));
  float theta = static_cast<float>(pos);
  for (int i = 0; i < p.n_rot / 2; ++i) {
    const float ff = p.freq_factors ? p.freq_factors[i] : 1.0f;
    const float angle = p.freq_scale * (theta / ff);
    cos_sin[2 * i] = std::cos(angle);
    cos_sin[2 * i + 1] = std::sin(angle);
    theta *= theta_scale;
  }
}

void rope_apply(const RopeParams& p, const float* cos_sin, float* x, int n_heads, int head_dim) {
  const int half = p.n_rot / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * head_dim;
    for (int i = 0; i < half; ++i) {
      // NORMAL rotates neighbours; NEOX rotates the two halves of the rotated block.
      const int a = p.style == RopeStyle::normal ? 2 * i : i;
      const int b = p.style == RopeStyle::normal ? 2 * i + 1 : i + half;
      const float c = cos_sin[2 * i], s = cos_sin[2 * i + 1];
      const float x0 = v[a], x1 = v[b];
      v[a] = x0 * c - x1 * s;
      v[b] = x0 * s + x1 * c;
    }
  }
}

}  // namespace channel
