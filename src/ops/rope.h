// Rotary position embedding: the one module every layer rotates with (the forward pass, the
// KV ring's queries and keys, the re-rotation of recalled keys, bounded attention's distance
// table).
//
// Two pairings (llama.cpp's names): NORMAL pairs dims (2i, 2i+1) (Llama), NEOX pairs
// (i, i + n_rot/2) (Gemma, Qwen); with partial rotary (n_rot < head_dim) dims >= n_rot are
// left as they are. Two ways to the angles of pair i, side by side:
// - f32 (`rope_angles`): llama.cpp's recurrence theta_0 = pos, theta_{i+1} = theta_i *
//   base^(-2/n_rot) in float, times freq_scale; what the contiguous forward pass uses, so
//   its logits match llama.cpp's.
// - f64 (`rope_inv_freq` + `rope_cos_sin_f64`): angle = pos * inv_freq[i] in double,
//   rounded once to f32, so a key at clock 10^9 (or moved by a large delta) carries only
//   the final rounding.
// Both feed the one rotation, `rope_rotate`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace channel {

enum class RopeStyle : uint8_t {
  normal,  // pairs (2i, 2i+1): llama
  neox,    // pairs (i, i + n_rot/2): gemma, qwen
};

// --- f32 angles (llama.cpp's recurrence) ---------------------------------------------------

struct RopeParams {
  RopeStyle style = RopeStyle::normal;
  int n_rot = 0;                        // rotated dimensions per head (even, <= head_dim)
  float base = 10000.0f;                // rope.freq_base
  float freq_scale = 1.0f;              // 1 / linear scaling factor
  const float* freq_factors = nullptr;  // [n_rot/2] optional per-pair divisors (rope_freqs)
};

// cos/sin of every pair for one position: cos_sin[2*i] = cos, cos_sin[2*i+1] = sin.
void rope_angles(const RopeParams& p, int32_t pos, float* cos_sin /* [n_rot] */);

// --- f64 angles ------------------------------------------------------------------------------

// inv_freq[i] = freq_scale * base^(-2i/n_rot) / freq_factors[i] in f64 (factors optional,
// [n_rot/2]); the one inverse-frequency builder. The caller checks the arguments.
std::vector<double> rope_inv_freq(uint32_t n_rot, double base, double freq_scale = 1.0,
                                  const float* freq_factors = nullptr);

// cs[2i] = cos(pos * inv_freq[i]), cs[2i+1] = sin(...), computed in f64, rounded once to f32.
void rope_cos_sin_f64(std::span<const double> inv_freq, double pos, float* cs /* [2 pairs] */);

// A rotary embedding with f64 angles: its style, n_rot and inverse frequencies.
struct RopeFreqs {
  RopeStyle style = RopeStyle::normal;
  uint32_t n_rot = 0;            // rotated dimensions per head (even, <= head_dim)
  std::vector<double> inv_freq;  // [n_rot/2] angle per unit position of pair i

  // Throws channel::Error for an odd or zero n_rot or a non-positive base.
  static RopeFreqs make(RopeStyle style, uint32_t n_rot, double base, double freq_scale = 1.0,
                        const float* freq_factors = nullptr);
};

// rope_cos_sin_f64 of f's frequencies.
void rope_cos_sin(const RopeFreqs& f, double pos, float* cs /* [n_rot] */);

// --- the rotation --------------------------------------------------------------------------

// out = R(cs) in for n_vecs head vectors of head_dim floats (in and out may alias): pair i
// (x_a, x_b) <- (x_a c - x_b s, x_a s + x_b c) with c = cs[2i], s = cs[2i+1]. Dimensions
// >= n_rot are copied.
void rope_rotate(RopeStyle style, uint32_t n_rot, const float* cs, const float* in, float* out,
                 size_t n_vecs, uint32_t head_dim);

// The forward pass's form: rotates the first n_rot dimensions of n_heads heads in place.
void rope_apply(const RopeParams& p, const float* cos_sin /* [n_rot] */, float* x,
                /* [n_heads][head_dim] */ int n_heads, int head_dim);

// The f64 forms: out = R(cs) in for n_heads heads, and angles and rotation in one call.
void rope_rotate(const RopeFreqs& f, const float* cs /* [n_rot] */, const float* in,
                 /* [n_heads][head_dim] */ float* out, uint32_t n_heads, uint32_t head_dim);
void rope_rotate_at(const RopeFreqs& f, double pos, const float* in, float* out, uint32_t n_heads,
                    uint32_t head_dim);

}  // namespace channel
