// Gated feed-forward activations and logit soft-capping.
//   silu_glu:      out = silu(gate) * up,      silu(x) = x / (1 + e^-x)        (Llama)
//   gelu_tanh_glu: out = gelu_tanh(gate) * up, through llama.cpp's f16 table   (Gemma 3)
// The GELU follows llama.cpp's CPU backend: gate rounded to f16, looked up in a table of
// f16-rounded gelu_tanh values, |x| >= 10 short-circuited. It stays within ~1e-3 relative
// of the exact function (gelu_tanh_exact) and reproduces the reference engine's logits.
// These are the scalar references (and the scalar variants); the SIMD variants and the
// dispatching silu_glu / gelu_tanh_glu live in backend/cpu/layer_kernels.h.
#pragma once

#include <cstdint>

namespace channel {

float gelu_tanh_exact(float x);  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in float

void silu_glu_ref(const float* gate, const float* up, int64_t n, float* out);

void gelu_tanh_glu_ref(const float* gate, const float* up, int64_t n, float* out);

// [65536] gelu_tanh of every f16 value (indexed by its bits), rounded to f16 and widened back
// to float: the table the reference and the SIMD variants look up.
const float* gelu_tanh_f16_table();

// x = cap * tanh(x / cap) (Gemma's final logit soft-capping).
void softcap(float* x, int64_t n, float cap);

}  // namespace channel
