// ModelHparams: the hyperparameters of a supported architecture, read from GGUF metadata
// (`<arch>.*` keys), plus the per-layer rules that follow from them (window, rope base).
#pragma once

#include <string>

#include "bounded/bounded_hparams.h"
#include "ops/rope.h"

namespace channel {

class GgufFile;

enum class Arch { llama, gemma3, qwen3, bounded };

struct ModelHparams {
  std::string arch;  // general.architecture, as in the file
  Arch arch_id = Arch::llama;
  int n_vocab = 0;      // rows of token_embd.weight
  int n_embd = 0;       // <arch>.embedding_length
  int n_layer = 0;      // <arch>.block_count
  int n_head = 0;       // <arch>.attention.head_count
  int n_head_kv = 0;    // <arch>.attention.head_count_kv (default n_head)
  int head_dim = 0;     // <arch>.attention.key_length (default n_embd / n_head)
  int head_dim_v = 0;   // <arch>.attention.value_length (default head_dim)
  int n_ff = 0;         // <arch>.feed_forward_length
  int n_ctx_train = 0;  // <arch>.context_length
  int n_rot = 0;        // <arch>.rope.dimension_count (default head_dim)
  float rms_eps = 0;    // <arch>.attention.layer_norm_rms_epsilon
  RopeStyle rope_style = RopeStyle::normal;
  float rope_base = 10000.0f;        // <arch>.rope.freq_base: global layers
  float rope_base_swa = 10000.0f;    // <arch>.rope.freq_base_swa: sliding layers (gemma3)
  float rope_freq_scale = 1.0f;      // 1 / <arch>.rope.scaling.factor when the type is linear
  int sliding_window = 0;            // <arch>.attention.sliding_window; 0 = no sliding layers
  int sliding_window_pattern = 1;    // <arch>.attention.sliding_window_pattern (gemma3, default 6)
  float embd_scale = 1.0f;           // sqrt(n_embd) for gemma3
  float attn_scale = 0.0f;           // score scale: 1/sqrt(query_pre_attn_scalar or head_dim)
  float final_logit_softcap = 0.0f;  // <arch>.final_logit_softcapping; 0 = none
  bool has_qk_norm = false;          // gemma3, qwen3: attn_q_norm / attn_k_norm
  bool has_post_norms = false;       // gemma3: post_attention_norm / post_ffw_norm
  bool gelu_ffn = false;             // gemma3: GELU-tanh GLU, else SiLU GLU
  BoundedHparams bounded;            // bounded: W, S, rd, per-layer types (empty otherwise)

  // Sliding layers see the last `sliding_window` positions; global layers see all of them.
  bool is_sliding(int il) const {
    return sliding_window > 0 && il % sliding_window_pattern != sliding_window_pattern - 1;
  }
  // Bounded architecture: layer il is a swa_sink_v1 layer (ring + sinks), not KV attention.
  bool is_bounded(int il) const { return arch_id == Arch::bounded && bounded.is_bounded(il); }
  int window_of(int il) const { return is_sliding(il) ? sliding_window : 0; }  // 0 = causal
  float rope_base_of(int il) const { return is_sliding(il) ? rope_base_swa : rope_base; }
  float rope_scale_of(int il) const { return is_sliding(il) ? 1.0f : rope_freq_scale; }
};

// Reads and checks the hyperparameters. `n_vocab` is left 0 (it comes from the tensors).
// Throws channel::Error for an unknown architecture or a missing/invalid key (named).
ModelHparams read_hparams(const GgufFile& gguf);

}  // namespace channel
