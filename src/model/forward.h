// forward(): one batch of tokens through a llama or gemma3 model, top to bottom. The batch
// is processed at once (every matmul sees all n rows, attention runs over the whole chunk),
// keys/values are written to the slots the caller names, and each query attends to the
// slots the caller says it sees.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "bounded/bounded_attention.h"
#include "model/kv_cache.h"
#include "model/model.h"

namespace channel {

class ThreadPool;

// Storage and attention supplied by the session instead of a KvCache (the KV slot
// geometry of kv/, and the test oracle). forward() then leaves q and k unrotated, hands
// each token's k/v to store() in batch order, and asks attend() for each (token, KV head).
class AttentionBackend {
 public:
  virtual ~AttentionBackend() = default;
  // k: [n_head_kv][head_dim], v: [n_head_kv][head_dim_v] of batch token t (after q/k norms).
  virtual void store(int il, int t, const float* k, const float* v) = 0;
  // q: [group][head_dim], the unrotated query heads hk*group .. hk*group+group-1 of token t;
  // out: [group][head_dim_v]. Called concurrently; thread < the pool's size.
  virtual void attend(int il, int t, int hk, const float* q, float* out, int thread) = 0;
  // The end of the attention segment that begins at batch token a (a < end <= n): forward()
  // stores the K/V of tokens [a, end), then attends queries [a, end), segment after segment.
  // A backend whose later tokens overwrite slots that earlier queries of the batch still see
  // (a ring that evicts) cuts the batch there; query results do not depend on the cuts.
  virtual int segment_end(int a, int n) {
    (void)a;
    return n;
  }
};

struct ForwardBatch {
  std::span<const int32_t> tokens;     // [n] token ids, each < n_vocab
  std::span<const int32_t> positions;  // [n] rope positions
  std::span<const int32_t> slots;      // [n] KV slot that receives each token's keys/values
  // Slots query t (0 <= t < n) attends to on layer il; it includes the query's own slot.
  // Called concurrently from several threads.
  std::function<std::span<const int32_t>(int il, int t)> visible_slots;
  // When set, positions, slots and visible_slots are unused (see AttentionBackend).
  AttentionBackend* attention = nullptr;
};

// none: no final norm and LM head (a chunk before the last of a prompt, whose K/V and
// residual stream are all the caller needs).
enum class LogitsFor { last, all, none };

// Activations of one batch, allocated once per session for up to max_batch tokens.
struct ForwardScratch {
  ForwardScratch(const ModelHparams& hp, int max_batch, int n_slots, int n_threads);

  int max_batch;
  std::vector<float> x;             // [max_batch][n_embd]              residual stream
  std::vector<float> xn;            // [max_batch][n_embd]              normed input of a sub-block
  std::vector<float> q;             // [max_batch][n_head][head_dim]
  std::vector<float> k;             // [max_batch][n_head_kv][head_dim]
  std::vector<float> v;             // [max_batch][n_head_kv][head_dim_v]
  std::vector<float> attn;          // [max_batch][n_head][head_dim_v]  attention output per head
  std::vector<float> proj;          // [max_batch][n_embd]              attention / FFN output
  std::vector<float> gate;          // [max_batch][n_ff]                gate, then activated product
  std::vector<float> up;            // [max_batch][n_ff]
  std::vector<float> rope_global;   // [max_batch][n_rot] cos/sin, global layers
  std::vector<float> rope_sliding;  // [max_batch][n_rot] cos/sin, sliding layers
  std::vector<float> scores;        // [n_threads][n_slots]             softmax row per thread
  std::unique_ptr<BoundedScratch> bounded;  // bounded architecture: q/k/v/attn of its layers
};

// Runs the batch (n <= scratch.max_batch) and writes logits: [n_vocab] for the last token,
// or [n][n_vocab] for every token. With batch.attention set, kv only supplies the states of
// bounded layers (its K/V slots are unused, so it may have none).
void forward(const Model& model, KvCache& kv, const ForwardBatch& batch, LogitsFor which,
             ForwardScratch& scratch, ThreadPool& pool, float* logits);
// The same with batch.attention set and no KvCache (not for bounded layers).
void forward(const Model& model, const ForwardBatch& batch, LogitsFor which,
             ForwardScratch& scratch, ThreadPool& pool, float* logits);

}  // namespace channel
