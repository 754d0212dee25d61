// bounded_attention / bounded_attention_batch: one bounded (swa_sink_v1) attention layer on
// the normed residual input — project q/k/v, per-head q/k RMS norms, insert the raw k/v into
// the ring, attend over S sinks + ≤ W window keys, project with W_o. The caller (the model's
// forward) applies attn_norm before and post_attention_norm + residual after.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "bounded/bounded_attention_core.h"
#include "bounded/bounded_config.h"
#include "bounded/bounded_state.h"
#include "ops/weight.h"

namespace channel {

// Weights of one bounded-anchor layer (views; the model owns the storage).
struct BoundedWeights {
  WeightMatrix wq;                // [n_heads * head_dim][n_embd]
  WeightMatrix wk;                // [n_kv_heads * head_dim][n_embd]
  WeightMatrix wv;                // [n_kv_heads * head_dim][n_embd]
  WeightMatrix wo;                // [n_embd][n_heads * head_dim]
  const float* q_norm = nullptr;  // [head_dim] attn_q_norm, stored as 1 + w
  const float* k_norm = nullptr;  // [head_dim] attn_k_norm, stored as 1 + w
  const float* sink_k = nullptr;  // [n_kv_heads][S][head_dim] as used (BoundedSinks::k)
  const float* sink_v = nullptr;  // [n_kv_heads][S][head_dim]
};

// Activations of up to max_batch positions, allocated once.
struct BoundedScratch {
  BoundedScratch(const BoundedAttnCfg& cfg, int max_batch);
  int max_batch;
  std::vector<float> q;     // [max_batch][n_heads][head_dim]
  std::vector<float> k;     // [max_batch][n_kv_heads][head_dim]
  std::vector<float> v;     // [max_batch][n_kv_heads][head_dim]
  std::vector<float> attn;  // [max_batch][n_heads][head_dim]
};

// Throws channel::Error when the weight shapes disagree with cfg (named field).
void check_bounded_weights(const BoundedAttnCfg& cfg, const BoundedWeights& w, int64_t n_embd);

// One position (the next one, state.seen()): y = W_o · attend(norm(W_q x), norm(W_k x), W_v x).
void bounded_attention(const BoundedAttnCfg& cfg, const BoundedWeights& w, BoundedState& state,
                       const float* x,  // [n_embd]
                       float* y,        // [n_embd]
                       BoundedScratch& scratch, ThreadPool& pool);

// A prefill chunk of n positions: the projections run as chunk matmuls (each weight row
// streams once per max_batch rows), then every position attends over ring + chunk with the
// same per-position code as bounded_attention, so outputs and state are bit-identical to n
// single calls.
void bounded_attention_batch(const BoundedAttnCfg& cfg, const BoundedWeights& w,
                             BoundedState& state,
                             const float* x,  // [n][n_embd]
                             int64_t n,
                             float* y,  // [n][n_embd]
                             BoundedScratch& scratch, ThreadPool& pool);

}  // namespace channel
