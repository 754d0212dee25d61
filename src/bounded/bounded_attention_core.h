// bounded_attend: the bounded (swa_sink_v1) attention core on already-projected, already
// normed q/k/v. For each position t of a chunk it inserts the raw k_t, v_t and computes
//   s_s = q̂_t · k̂ˢ_s · scale                  (S sinks, NoPE)
//   s_j = (R(t − j) q̂_t) · k̂_j · scale          (window j ∈ (t − W, t])
//   out_t = Σ_s p_s v̂ˢ_s + Σ_j p_j v_j,  p = softmax over sinks and window together.
// Every position sees at most S + W keys whatever the chunk length or the context.
#pragma once

#include <cstdint>

#include "backend/cpu/thread_pool.h"
#include "bounded/bounded_config.h"
#include "bounded/bounded_state.h"

namespace channel {

// Runs n consecutive positions starting at state.seen(). Decoding is n = 1; a prefill chunk
// of any n gives bit-identical outputs and state, because every (position, head) pair runs
// the same code over the same keys in the same order. With a pool, (position, KV head,
// query-head slice) tasks run on its threads; the results do not depend on the thread count.
// sink_k, sink_v: [n_kv_heads][S][head_dim] (as the operator uses them; see BoundedAttnCfg).
void bounded_attend(const BoundedAttnCfg& cfg, const float* sink_k, const float* sink_v,
                    BoundedState& state,
                    const float* q,  // [n][n_heads][head_dim]
                    const float* k,  // [n][n_kv_heads][head_dim]
                    const float* v,  // [n][n_kv_heads][head_dim]
                    int64_t n,
                    float* out,  // [n][n_heads][head_dim]
                    ThreadPool* pool = nullptr);

// (R(Δ) q) · k for one head: the first 2·half dims rotate in NEOX pairs (i, i + half) by the
// table row (cos, sin); the rest are a plain dot product.
float bounded_rotated_dot(const float* q, const float* k, const float* cos, const float* sin,
                          int half, int head_dim);

}  // namespace channel
