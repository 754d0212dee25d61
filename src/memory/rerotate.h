// rerotate.h: moving stored keys to another position. A key stored rotated at position p is
// turned into the key at p + Δ by one Givens rotation per rotary pair, angle Δ·inv_freq[i]
// computed in f64 (RoPE rotations compose: R(p + Δ) = R(Δ) R(p)), with the f64 angles and the
// rotation of ops/rope.h. Values are position-free and never touched.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "ops/rope.h"

namespace channel {

// The rotary embedding of one layer's keys.
struct RotaryDims {
  RopeStyle style = RopeStyle::neox;
  uint32_t head_dim = 0;
  uint32_t n_heads = 0;          // heads per token row (K/V heads): row = [n_heads][head_dim]
  uint32_t n_rot = 0;            // rotated dims per head, even, <= head_dim
  std::vector<double> inv_freq;  // [n_rot / 2] radians per position of pair i

  // inv_freq[i] = freq_scale * base^(-2i / n_rot) / freq_factors[i] (llama 3's rope_freqs;
  // optional, [n_rot / 2]). Throws channel::Error for bad sizes.
  static RotaryDims make(RopeStyle style, uint32_t n_heads, uint32_t head_dim, uint32_t n_rot,
                         double base, double freq_scale = 1.0, const float* freq_factors = nullptr);
  uint32_t row_dim() const { return n_heads * head_dim; }
};

// cos/sin of Δ·θ_i (θ = inv_freq) in f64 without a sin or cos per call, for recall. The
// rotations by d·16^j positions (digit d = 1..15, j < kDigits) are built once from the exact
// angles 2^k·θ_i (a power-of-two scaling) by f64 complex products, and the rotation by an
// integer Δ is the product of those of the hex digits of |Δ| (conjugated for Δ < 0): at most
// kDigits products per pair, error about 1e-14 against the exact angle (std::cos(Δ·θ) itself
// carries |Δ·θ|·1e-16 from rounding the product). Other Δ (fractional, or |Δ| >= 16^kDigits)
// use std::cos/sin.
class RotationTable {
 public:
  static constexpr int kDigits = 8;  // |Δ| < 2^32
  RotationTable() = default;
  explicit RotationTable(const RotaryDims& r);
  // True when built for these frequencies.
  bool matches(const RotaryDims& r) const {
    return inv_freq_.size() == r.inv_freq.size() &&
           std::memcmp(inv_freq_.data(), r.inv_freq.data(), inv_freq_.size() * sizeof(double)) == 0;
  }
  size_t n_pairs() const { return inv_freq_.size(); }
  // c[i] = cos(Δ·θ_i), s[i] = sin(Δ·θ_i); c, s: [n_pairs]
  void cos_sin(double delta, double* c, double* s) const;

 private:
  std::vector<double> inv_freq_;   // [n_pairs]
  std::vector<double> cos_, sin_;  // [kDigits][15][n_pairs] of d·16^j·θ_i, d = 1..15
};

// cos/sin of Δ·inv_freq[i] in f64, rounded once to f32: cs[2i] = cos, cs[2i + 1] = sin.
void rotation_cos_sin(const RotaryDims& r, double delta, float* cs /* [n_rot] */);

// Rotates n_rows key rows in place by the angles `cs` (from rotation_cos_sin).
// rows: [n_rows][n_heads][head_dim]
void rotate_rows(const RotaryDims& r, const float* cs, float* rows, size_t n_rows);

// rows <- rows rotated by Δ positions (rotation_cos_sin + rotate_rows).
void rerotate_rows(const RotaryDims& r, double delta, float* rows, size_t n_rows);

// Reference: RoPE of an unrotated row at absolute position `pos`, entirely in f64.
// raw, out: [n_heads][head_dim]
void rope_row_f64_ref(const RotaryDims& r, double pos, const float* raw, double* out);

}  // namespace channel
