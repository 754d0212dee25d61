// RoPE with f64 angles: tables and rotation (scalar; runs once per key write and once per
// query group, never per key inside attention).
#include "kv/rope_f64.h"

#include <cmath>
#include <vector>

#include "util/error.h"

namespace channel {

RopeFreqs RopeFreqs::make(RopeLayout layout, uint32_t n_rot, double base, double freq_scale,
                          const float* freq_factors) {
  if (n_rot == 0 || n_rot % 2 != 0)
    throw_error("kv: rope n_rot must be even and > 0 (got {})", n_rot);
  if (!(base > 0.0)) throw_error("kv: rope base must be > 0 (got {})", base);
  RopeFreqs f;
  f.layout = layout;
  f.n_rot = n_rot;
  f.inv_freq.resize(n_rot / 2);
  for (uint32_t i = 0; i < n_rot / 2; ++i) {
    double w = freq_scale * std::pow(base, -2.0 * i / n_rot);
    if (freq_factors) w /= freq_factors[i];
    f.inv_freq[i] = w;
  }
  return f;
}

void rope_cos_sin(const RopeFreqs& f, double pos, float* cs) {
  for (uint32_t i = 0; i < f.n_rot / 2; ++i) {
    const double angle = pos * f.inv_freq[i];
    cs[2 * i] = static_cast<float>(std::cos(angle));
    cs[2 * i + 1] = static_cast<float>(std::sin(angle));
  }
}

void rope_rotate(const RopeFreqs& f, const float* cs, const float* in, float* out, uint32_t n_heads,
                 uint32_t head_dim) {
  const uint32_t half = f.n_rot / 2;
  for (uint32_t h = 0; h < n_heads; ++h) {
    const float* x = in + size_t{h} * head_dim;
    float* y = out + size_t{h} * head_dim;
    for (uint32_t i = 0; i < half; ++i) {
      const uint32_t a = f.layout == RopeLayout::normal ? 2 * i : i;
      const uint32_t b = f.layout == RopeLayout::normal ? 2 * i + 1 : i + half;
      const float xa = x[a], xb = x[b], c = cs[2 * i], s = cs[2 * i + 1];
      y[a] = xa * c - xb * s;
      y[b] = xa * s + xb * c;
    }
    for (uint32_t d = f.n_rot; d < head_dim; ++d) y[d] = x[d];
  }
}

void rope_rotate_at(const RopeFreqs& f, double pos, const float* in, float* out, uint32_t n_heads,
                    uint32_t head_dim) {
  std::vector<float> cs(f.n_rot);
  rope_cos_sin(f, pos, cs.data());
  rope_rotate(f, cs.data(), in, out, n_heads, head_dim);
}

}  // namespace channel
