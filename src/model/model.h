// Model: the read-only weights of one GGUF model (llama, gemma3 or qwen3), its hyperparameters and
// tokenizer. Loaded once, shared by any number of sessions (std::shared_ptr<const Model>);
// tensor data stays in the memory mapping and is never copied, except the small norm vectors.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "bounded/bounded_hparams.h"
#include "gguf/gguf_reader.h"
#include "model/hparams.h"
#include "ops/weight.h"

namespace channel {

class Tokenizer;

using LoadProgress = std::function<void(float fraction)>;

// One transformer block. Matrices are [rows = out][cols = in], y = W x.
struct LayerWeights {
  std::vector<float> attn_norm;            // [n_embd]
  WeightMatrix wq;                         // [n_head * head_dim][n_embd]
  WeightMatrix wk;                         // [n_head_kv * head_dim][n_embd]
  WeightMatrix wv;                         // [n_head_kv * head_dim][n_embd]
  WeightMatrix wo;                         // [n_embd][n_head * head_dim]
  std::vector<float> attn_q_norm;          // [head_dim]  gemma3, qwen3
  std::vector<float> attn_k_norm;          // [head_dim]  gemma3, qwen3
  std::vector<float> post_attention_norm;  // [n_embd]    gemma3 only
  std::vector<float> ffn_norm;             // [n_embd]
  WeightMatrix ffn_gate;                   // [n_ff][n_embd]
  WeightMatrix ffn_up;                     // [n_ff][n_embd]
  WeightMatrix ffn_down;                   // [n_embd][n_ff]
  std::vector<float> post_ffw_norm;        // [n_embd]    gemma3 only
  BoundedSinks sinks;  // bounded layers: k, v [n_head_kv][S][head_dim]; empty otherwise
};

struct ModelWeights {
  WeightMatrix token_embd;  // [n_vocab][n_embd]
  WeightMatrix output;      // [n_vocab][n_embd]; token_embd itself when tied
  bool tied_output = true;
  std::vector<float> output_norm;  // [n_embd]
  std::vector<float> rope_freqs;   // [n_rot / 2] optional llama rope frequency divisors
  std::vector<LayerWeights> layers;
  // Bounded architecture: the one rotation table of its (W, rd, base) and the layer config.
  std::shared_ptr<const BoundedRope> bounded_rope;
  BoundedAttnCfg bounded_cfg;
};

class Model {
 public:
  // Maps and validates the file: metadata, every tensor's presence, type and shape, the
  // tokenizer. Throws channel::Error with one clear line on any problem.
  static std::shared_ptr<const Model> load(const std::string& path,
                                           const LoadProgress& progress = {});
  // Same over bytes the caller keeps alive for the model's lifetime (the embedded model).
  static std::shared_ptr<const Model> load_from_memory(std::span<const unsigned char> bytes,
                                                       std::string name,
                                                       const LoadProgress& progress = {});
  ~Model();

  const ModelHparams& hparams() const { return hparams_; }
  const ModelWeights& weights() const { return weights_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const GgufFile& gguf() const { return gguf_; }
  size_t weight_bytes() const { return weight_bytes_; }  // all tensor bytes (for GB/s)

 private:
  Model(GgufFile gguf, const LoadProgress& progress);

  GgufFile gguf_;
  ModelHparams hparams_;
  ModelWeights weights_;
  std::unique_ptr<Tokenizer> tokenizer_;
  size_t weight_bytes_ = 0;
  // Q4_0/Q5_0 matrices regrouped for this CPU's kernels (WeightMatrix::groups), 64-byte
  // aligned.
  struct FreeBytes {
    void operator()(uint8_t* p) const;
  };
  std::vector<std::unique_ptr<uint8_t, FreeBytes>> groups_;
  void make_quant_groups();
};

}  // namespace channel
