// BoundedAttnCfg: the per-layer geometry of a bounded (swa_sink_v1) attention layer plus the
// shared rotation table. It carries no position: the operator never sees one.
#pragma once

#include <string_view>

#include "bounded/bounded_rope.h"

namespace channel {

// Limits on header values, so a hostile file cannot ask for absurd allocations.
inline constexpr int BOUNDED_MAX_WINDOW = 1 << 20;
inline constexpr int BOUNDED_MAX_SINKS = 256;

struct BoundedAttnCfg {
  int n_heads = 0;
  int n_kv_heads = 0;  // n_heads is a multiple of it (GQA)
  int head_dim = 0;
  int rope_dims = 0;  // rd: first rd dims of a head rotate, pairs (i, i + rd/2); even, ≤ head_dim
  int window = 0;     // W: window keys j ∈ (t − W, t], the token itself included
  int n_sinks = 0;    // S: learned NoPE sink keys/values per KV head
  float attn_scale = 0.0f;  // 1/sqrt(head_dim) for the gemma3 block
  float norm_eps = 1e-6f;   // RMS norm epsilon of attn_q_norm / attn_k_norm
  // false (default): sink keys are used exactly as stored, already in the post-attn_k_norm
  // space. true: they pass through attn_k_norm once, when the weights are prepared.
  bool sink_k_norm = false;
  const BoundedRope* rope = nullptr;  // table of [W][rd/2]; shared between layers
};

// Throws channel::Error "<where>: ..." naming the bad field when the geometry is unusable
// (W = 0, S too large, rd odd or > head_dim, heads not a multiple of kv heads, rope mismatch).
void validate_bounded_cfg(const BoundedAttnCfg& cfg, std::string_view where);

}  // namespace channel
