// Rotary position embedding: f32 and f64 angles and the one rotation (scalar; it runs once
// per token, key write or query group, never per key inside attention).
#include "ops/rope.h"

#include <cmath>

#include "util/error.h"

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

std::vector<double> rope_inv_freq(uint32_t n_rot, double base, double freq_scale,
                                  const float* freq_factors) {
  std::vector<double> inv_freq(n_rot / 2);
  for (uint32_t i = 0; i < n_rot / 2; ++i) {
    double w = freq_scale * std::pow(base, -2.0 * i / n_rot);
    if (freq_factors) w /= freq_factors[i];
    inv_freq[i] = w;
  }
  return inv_freq;
}

void rope_cos_sin_f64(std::span<const double> inv_freq, double pos, float* cs) {
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    const double angle = pos * inv_freq[i];
    cs[2 * i] = static_cast<float>(std::cos(angle));
    cs[2 * i + 1] = static_cast<float>(std::sin(angle));
  }
}

RopeFreqs RopeFreqs::make(RopeStyle style, uint32_t n_rot, double base, double freq_scale,
                          const float* freq_factors) {
  if (n_rot == 0 || n_rot % 2 != 0)
    throw_error("rope: n_rot must be even and > 0 (got {})", n_rot);
  if (!(base > 0.0)) throw_error("rope: base must be > 0 (got {})", base);
  RopeFreqs f;
  f.style = style;
  f.n_rot = n_rot;
  f.inv_freq = rope_inv_freq(n_rot, base, freq_scale, freq_factors);
  return f;
}

void rope_cos_sin(const RopeFreqs& f, double pos, float* cs) {
  rope_cos_sin_f64(f.inv_freq, pos, cs);
}

void rope_rotate(RopeStyle style, uint32_t n_rot, const float* cs, const float* in, float* out,
                 size_t n_vecs, uint32_t head_dim) {
  const uint32_t half = n_rot / 2;
  for (size_t h = 0; h < n_vecs; ++h) {
    const float* x = in + h * head_dim;
    float* y = out + h * head_dim;
    if (style == RopeStyle::neox) {  // the two halves of the rotated block
      for (uint32_t i = 0; i < half; ++i) {
        const float xa = x[i], xb = x[i + half], c = cs[2 * i], s = cs[2 * i + 1];
        y[i] = xa * c - xb * s;
        y[i + half] = xa * s + xb * c;
      }
    } else {  // neighbours
      for (uint32_t i = 0; i < half; ++i) {
        const float xa = x[2 * i], xb = x[2 * i + 1], c = cs[2 * i], s = cs[2 * i + 1];
        y[2 * i] = xa * c - xb * s;
        y[2 * i + 1] = xa * s + xb * c;
      }
    }
    if (y != x)
      for (uint32_t d = n_rot; d < head_dim; ++d) y[d] = x[d];
  }
}

void rope_apply(const RopeParams& p, const float* cos_sin, float* x, int n_heads, int head_dim) {
  rope_rotate(p.style, static_cast<uint32_t>(p.n_rot), cos_sin, x, x, static_cast<size_t>(n_heads),
              static_cast<uint32_t>(head_dim));
}

void rope_rotate(const RopeFreqs& f, const float* cs, const float* in, float* out, uint32_t n_heads,
                 uint32_t head_dim) {
  rope_rotate(f.style, f.n_rot, cs, in, out, n_heads, head_dim);
}

void rope_rotate_at(const RopeFreqs& f, double pos, const float* in, float* out, uint32_t n_heads,
                    uint32_t head_dim) {
  std::vector<float> cs(f.n_rot);
  rope_cos_sin(f, pos, cs.data());
  rope_rotate(f, cs.data(), in, out, n_heads, head_dim);
}

}  // namespace channel
