// Rotary position embedding in llama.cpp's two layouts: NORMAL (pairs (2i, 2i+1), Llama)
// and NEOX (pairs (i, i + n_rot/2), Gemma). Angles follow llama.cpp exactly: theta_0 = pos
// and theta_{i+1} = theta_i * base^(-2/n_rot) in float, times freq_scale (linear scaling).
#pragma once

#include <cstdint>

namespace channel {

enum class RopeStyle { normal, neox };

struct RopeParams {
  RopeStyle style = RopeStyle::normal;
  int n_rot = 0;                        // rotated dimensions per head (even, <= head_dim)
  float base = 10000.0f;                // rope.freq_base
  float freq_scale = 1.0f;              // 1 / linear scaling factor
  const float* freq_factors = nullptr;  // [n_rot/2] optional per-pair divisors (rope_freqs)
};

// cos/sin of every pair for one position: cos_sin[2*i] = cos, cos_sin[2*i+1] = sin.
void rope_angles(const RopeParams& p, int32_t pos, float* cos_sin /* [n_rot] */);

// Rotates the first n_rot dimensions of each of n_heads heads in place.
void rope_apply(const RopeParams& p, const float* cos_sin /* [n_rot] */, float* x,
                /* [n_heads][head_dim] */ int n_heads, int head_dim);

}  // namespace channel
