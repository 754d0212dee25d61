// BoundedHparams: the `bounded.*` GGUF keys only a bounded model has (window, sinks, rotary
// dims, per-layer types), read and checked once at load, and load_bounded_sinks, which
// checks a bounded layer's sink tensors against them and prepares them for the operator.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bounded/bounded_config.h"

namespace channel {

class GgufFile;

enum class BoundedLayerType : uint8_t {
  bounded = 0,  // swa_sink_v1: ring of W raw keys + S sinks
  global = 1,   // causal softmax over every position
};

struct BoundedHparams {
  int window = 0;              // bounded.attention.window (W)
  int n_sinks = 0;             // bounded.attention.sink_count (S)
  int rope_dims = 0;           // bounded.rope.dimension_count (rd ≤ head_dim; default head_dim)
  double rope_base = 0.0;      // bounded.rope.freq_base (default 10000)
  bool sink_key_norm = false;  // bounded.attention.sink_key_norm (optional, default false)
  std::vector<BoundedLayerType> layer_types;  // [n_layer] bounded.attention.layer_types

  bool is_bounded(int layer) const { return layer_types[layer] == BoundedLayerType::bounded; }
};

// Reads the bounded keys and checks them against the geometry read elsewhere from the
// header. Throws channel::Error naming the file and key (W = 0, S too large, rd > head_dim,
// layer_types of the wrong length or with unknown values, key_length ≠ value_length).
BoundedHparams read_bounded_hparams(const GgufFile& gguf, int n_layer, int n_heads, int n_kv_heads,
                                    int head_dim, int head_dim_v);

// The per-layer operator config (validated). `rope` must be the model's table for
// (W, rd, base), from a BoundedRopeCache.
BoundedAttnCfg bounded_layer_cfg(const BoundedHparams& hp, int n_heads, int n_kv_heads,
                                 int head_dim, float norm_eps, const BoundedRope* rope);

// A bounded layer's sinks as the operator uses them (owned copies, F32).
struct BoundedSinks {
  std::vector<float> k;  // [n_kv_heads][S][head_dim]
  std::vector<float> v;  // [n_kv_heads][S][head_dim]
};

// Finds blk.N.attn_sink_k/v.weight, checks type F32 and ne = [head_dim, S, n_kv_heads], and
// copies them. With hp.sink_key_norm the keys pass through attn_k_norm (k_norm: [head_dim],
// stored 1 + w) here, once. A global layer must carry no sink tensors. Throws channel::Error
// naming the file and tensor. Returns empty sinks for a global layer.
BoundedSinks load_bounded_sinks(const GgufFile& gguf, const BoundedHparams& hp, int layer,
                                int n_kv_heads, int head_dim, const float* k_norm, float norm_eps);

std::string bounded_sink_k_name(int layer);  // "blk.N.attn_sink_k.weight"
std::string bounded_sink_v_name(int layer);  // "blk.N.attn_sink_v.weight"

}  // namespace channel
