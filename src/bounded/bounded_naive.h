// bounded_attention_naive: the plain, never-optimised reference for the bounded operator.
// It does what the trainer does — absolute RoPE on q and k at their positions, then a full
// causal score matrix with a window-plus-sink mask — in f64. The served operator must agree
// with it (the identity R(t)ᵀR(j) = R(j − t) of the spec); tests and benches compare them.
#pragma once

#include <cstdint>

#include "bounded/bounded_config.h"

namespace channel {

// Positions are pos0 + i for i ∈ [0, T). Uses cfg's geometry and scale; the rotation angles
// are (pos0 + i) · base^(−2m/rd) in f64 (cfg.rope is not used).
void bounded_attention_naive(const BoundedAttnCfg& cfg, double rope_base,
                             const float* sink_k,  // [n_kv_heads][S][head_dim]
                             const float* sink_v,  // [n_kv_heads][S][head_dim]
                             const float* q,       // [T][n_heads][head_dim]
                             const float* k,       // [T][n_kv_heads][head_dim]
                             const float* v,       // [T][n_kv_heads][head_dim]
                             int64_t n_tokens, uint64_t pos0,
                             float* out);  // [T][n_heads][head_dim]

}  // namespace channel
