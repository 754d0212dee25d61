// Givens re-rotation of stored keys by Δ positions, and the f64 RoPE reference.
#include "memory/rerotate.h"

#include <algorithm>
#include <cmath>

#include "memory/rehydrate_kernels.h"
#include "util/error.h"

namespace channel {

RotaryDims RotaryDims::make(RopeStyle style, uint32_t n_heads, uint32_t head_dim, uint32_t n_rot,
                            double base, double freq_scale, const float* freq_factors) {
  if (n_heads == 0 || head_dim == 0) throw_error("rotary: n_heads and head_dim must be > 0");
  if (n_rot == 0 || n_rot % 2 != 0 || n_rot > head_dim) {
    throw_error("rotary: n_rot {} must be even, > 0 and <= head_dim {}", n_rot, head_dim);
  }
  if (!(base > 0.0) || !(freq_scale > 0.0)) {
    throw_error("rotary: base {} and freq_scale {} must be > 0", base, freq_scale);
  }
  RotaryDims r;
  r.style = style;
  r.n_heads = n_heads;
  r.head_dim = head_dim;
  r.n_rot = n_rot;
  if (freq_factors) {
    for (uint32_t i = 0; i < n_rot / 2; ++i)
      if (!(freq_factors[i] > 0.0f)) throw_error("rotary: freq_factors[{}] is not > 0", i);
  }
  r.inv_freq = rope_inv_freq(n_rot, base, freq_scale, freq_factors);
  return r;
}

RotationTable::RotationTable(const RotaryDims& r) : inv_freq_(r.inv_freq) {
  const size_t n = inv_freq_.size();
  cos_.resize(kDigits * 15 * n);
  sin_.resize(kDigits * 15 * n);
  std::vector<double> bit_c(n), bit_s(n);  // [n] rotation by 2^k positions
  for (int j = 0; j < kDigits; ++j) {
    double* cj = &cos_[j * 15 * n];
    double* sj = &sin_[j * 15 * n];
    for (int b = 0; b < 4; ++b) {  // digit 2^b: the exact angle 2^(4j + b)·θ
      for (size_t i = 0; i < n; ++i) {
        const double a = std::ldexp(inv_freq_[i], 4 * j + b);
        bit_c[i] = std::cos(a);
        bit_s[i] = std::sin(a);
      }
      const int d0 = 1 << b;  // digits d0 .. 2·d0 - 1 = d0 + (0 .. d0 - 1)
      std::copy(bit_c.begin(), bit_c.end(), cj + (d0 - 1) * n);
      std::copy(bit_s.begin(), bit_s.end(), sj + (d0 - 1) * n);
      for (int d = d0 + 1; d < 2 * d0; ++d) {
        std::copy(cj + (d - d0 - 1) * n, cj + (d - d0) * n, cj + (d - 1) * n);
        std::copy(sj + (d - d0 - 1) * n, sj + (d - d0) * n, sj + (d - 1) * n);
        compose_rotations(cj + (d - 1) * n, sj + (d - 1) * n, bit_c.data(), bit_s.data(), n);
      }
    }
  }
}

void RotationTable::cos_sin(double delta, double* c, double* s) const {
  const size_t n = inv_freq_.size();
  const double mag = std::fabs(delta);
  if (!(mag < std::ldexp(1.0, 4 * kDigits)) || mag != std::floor(mag)) {
    for (size_t i = 0; i < n; ++i) {
      c[i] = std::cos(delta * inv_freq_[i]);
      s[i] = std::sin(delta * inv_freq_[i]);
    }
    return;
  }
  // The factors of the nonzero hex digits, lowest first, multiplied in registers.
  const double* cf[kDigits];
  const double* sf[kDigits];
  int n_factors = 0;
  auto digits = static_cast<uint64_t>(mag);
  for (int j = 0; digits != 0; ++j, digits >>= 4) {
    const auto d = static_cast<size_t>(digits & 15);
    if (d == 0) continue;
    cf[n_factors] = &cos_[(j * 15 + d - 1) * n];
    sf[n_factors++] = &sin_[(j * 15 + d - 1) * n];
  }
  if (n_factors == 0) {  // Δ = 0
    std::fill(c, c + n, 1.0);
    std::fill(s, s + n, 0.0);
  } else {
    chain_rotations(cf, sf, n_factors, n, c, s);
  }
  if (delta < 0)
    for (size_t i = 0; i < n; ++i) s[i] = -s[i];
}

void rotation_cos_sin(const RotaryDims& r, double delta, float* cs) {
  rope_cos_sin_f64(r.inv_freq, delta, cs);
}

void rotate_rows(const RotaryDims& r, const float* cs, float* rows, size_t n_rows) {
  rope_rotate(r.style, r.n_rot, cs, rows, rows, n_rows * r.n_heads, r.head_dim);
}

void rerotate_rows(const RotaryDims& r, double delta, float* rows, size_t n_rows) {
  std::vector<float> cs(r.n_rot);  // [n_rot]
  rotation_cos_sin(r, delta, cs.data());
  rotate_rows(r, cs.data(), rows, n_rows);
}

void rope_row_f64_ref(const RotaryDims& r, double pos, const float* raw, double* out) {
  const uint32_t half = r.n_rot / 2;
  for (uint32_t h = 0; h < r.n_heads; ++h) {
    const float* x = raw + h * r.head_dim;
    double* y = out + h * r.head_dim;
    for (uint32_t d = 0; d < r.head_dim; ++d) y[d] = x[d];
    for (uint32_t i = 0; i < half; ++i) {
      const double c = std::cos(pos * r.inv_freq[i]), s = std::sin(pos * r.inv_freq[i]);
      const uint32_t a = r.style == RopeStyle::neox ? i : 2 * i;
      const uint32_t b = r.style == RopeStyle::neox ? i + half : 2 * i + 1;
      y[a] = c * x[a] - s * x[b];
      y[b] = s * x[a] + c * x[b];
    }
  }
}

}  // namespace channel
