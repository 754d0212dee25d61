// forward(): one batch of tokens through a llama, gemma3, qwen3 or bounded model, top to
// bottom, as a stack of transformer layers: norm -> Q/K/V -> attention -> W_o -> residual ->
// norm -> FFN -> residual. The batch is processed at once (every matmul sees all n rows).
// Attention is the one part a layer's KV storage decides: forward() hands the layer's
// projected, normed Q/K/V to the LayerAttention the caller names for that layer
// (model/layer_attention.h: the contiguous context and bounded layers; the slot ring's in
// runtime/ring_session.cpp), which rotates, stores and attends.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/model.h"

namespace channel {

class ThreadPool;

// The attention of one layer over the KV storage its implementation owns.
class LayerAttention {
 public:
  virtual ~LayerAttention() = default;
  // Batch tokens 0..n-1 of layer il. q: [n][n_head][head_dim], k: [n][n_head_kv][head_dim]
  // (after the per-head q/k norms, unrotated: an implementation may rotate them in place),
  // v: [n][n_head_kv][head_dim_v]. Stores the tokens' keys and values, then writes each
  // query head's output to out: [n][n_head][head_dim_v]. Token t sees itself and what its
  // storage holds before it, tokens t+1.. of the batch not.
  virtual void attend(int il, int n, float* q, float* k, const float* v, float* out,
                      ThreadPool& pool) = 0;
};

// A LayerAttention that takes the batch token by token and head by head, in the segments
// segment_end() names (the whole batch unless overridden): store() gets each token's k/v of
// a segment in batch order, then attend_head() each (token, KV head) of it, concurrently.
// The shape of the slot ring's attention and the test oracle's.
class PerHeadAttention : public LayerAttention {
 public:
  explicit PerHeadAttention(const ModelHparams& hp) : hp_(hp) {}
  void attend(int il, int n, float* q, float* k, const float* v, float* out,
              ThreadPool& pool) final;

 protected:
  // k: [n_head_kv][head_dim], v: [n_head_kv][head_dim_v] of batch token t (normed, unrotated).
  virtual void store(int il, int t, const float* k, const float* v) = 0;
  // q: [group][head_dim], the unrotated query heads hk*group .. hk*group+group-1 of token t;
  // out: [group][head_dim_v]. Called concurrently; thread < the pool's size.
  virtual void attend_head(int il, int t, int hk, const float* q, float* out, int thread) = 0;
  // The end of the segment that begins at batch token a (a < end <= n): attend() stores the
  // K/V of tokens [a, end), then attends queries [a, end), segment after segment. A storage
  // whose later tokens overwrite slots that earlier queries of the batch still see (a ring
  // that evicts) cuts the batch there; query results do not depend on the cuts.
  virtual int segment_end(int a, int n) {
    (void)a;
    return n;
  }

 private:
  const ModelHparams& hp_;
};

struct ForwardBatch {
  std::span<const int32_t> tokens;         // [n] token ids, each < n_vocab
  std::span<LayerAttention* const> layers;  // [n_layer] the attention of each layer
};

// none: no final norm and LM head (a chunk before the last of a prompt, whose K/V and
// residual stream are all the caller needs). hidden: every token's final norm, no LM head
// (an embedding or a text cue reads the rows, not the logits).
enum class LogitsFor { last, all, none, hidden };

// Activations of one batch, allocated once per session for up to max_batch tokens.
struct ForwardScratch {
  ForwardScratch(const ModelHparams& hp, int max_batch);

  int max_batch;
  std::vector<float> x;     // [max_batch][n_embd]              residual stream
  std::vector<float> xn;    // [max_batch][n_embd]              normed input of a sub-block
  std::vector<float> q;     // [max_batch][n_head][head_dim]
  std::vector<float> k;     // [max_batch][n_head_kv][head_dim]
  std::vector<float> v;     // [max_batch][n_head_kv][head_dim_v]
  std::vector<float> attn;  // [max_batch][n_head][head_dim_v]  attention output per head
  std::vector<float> proj;  // [max_batch][n_embd]              attention / FFN output
  std::vector<float> gate;  // [max_batch][n_ff]                gate, then activated product
  std::vector<float> up;    // [max_batch][n_ff]
};

// Runs the batch (n <= scratch.max_batch) and writes logits: [n_vocab] for the last token,
// [n][n_vocab] for every token, or none (logits unused). Leaves every token's last residual
// in scratch.x, and with LogitsFor::all or hidden every token's final-norm row in scratch.xn.
void forward(const Model& model, const ForwardBatch& batch, LogitsFor which,
             ForwardScratch& scratch, ThreadPool& pool, float* logits);

}  // namespace channel
