// RoPE at arbitrary (large or fractional) positions with angles computed in f64, so a key
// rotated at clock 10^9 carries only the final f32 rounding. The KV ring stores keys rotated
// at their stored position and rotates queries once per slot group (see virtual_positions.h).
#pragma once

#include <cstdint>
#include <vector>

namespace channel {

enum class RopeLayout : uint8_t {
  normal,  // pairs (2i, 2i+1): llama
  neox,    // pairs (i, i + n_rot/2): gemma, qwen
};

struct RopeFreqs {
  RopeLayout layout = RopeLayout::normal;
  uint32_t n_rot = 0;            // rotated dimensions per head (even, <= head_dim)
  std::vector<double> inv_freq;  // [n_rot/2] angle per unit position of pair i

  // inv_freq[i] = freq_scale * base^(-2i/n_rot) / freq_factors[i] (factors optional,
  // [n_rot/2]). Throws channel::Error for an odd or zero n_rot or a non-positive base.
  static RopeFreqs make(RopeLayout layout, uint32_t n_rot, double base, double freq_scale = 1.0,
                        const float* freq_factors = nullptr);
};

// cos/sin of every pair at `pos`: cs[2i] = cos(pos * inv_freq[i]), cs[2i+1] = sin(...),
// computed in f64 and rounded once to f32.
void rope_cos_sin(const RopeFreqs& f, double pos, float* cs /* [n_rot] */);

// out = R(pos) in for n_heads heads; in and out may alias. Dimensions >= n_rot are copied.
void rope_rotate(const RopeFreqs& f, const float* cs /* [n_rot] */, const float* in,
                 /* [n_heads][head_dim] */ float* out, uint32_t n_heads, uint32_t head_dim);

// Convenience: angles and rotation in one call.
void rope_rotate_at(const RopeFreqs& f, double pos, const float* in, float* out, uint32_t n_heads,
                    uint32_t head_dim);

}  // namespace channel
