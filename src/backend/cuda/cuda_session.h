// The whole forward of a llama / gemma3 / qwen3 / bounded model on one CUDA device, for the
// contiguous session (slot i holds position i, as runtime/session.h): CudaWeights uploads a model's
// weights once (repacked, q/k/v and gate/up fused where their types agree); a CudaSession
// owns the device KV arena (f16; f32 for F32 models), the activations and the step buffers, all
// allocated once, and runs decode (steps of up to kVerifyTokens tokens: captured CUDA graphs) and
// batched prefill. Per step only the step's token ids, positions and slot ranges go to the device;
// the logits come back. This header needs no CUDA headers, so frontends include it with the plain
// C++ compiler.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/model.h"

namespace channel::cuda {

struct DeviceInfo;

class CudaWeights {
 public:
  // Selects the device and uploads. One-line channel::Error, before any upload, when there is
  // no driver or device, the architecture, a weight type or a head size is not supported, or
  // the weights do not fit in free device memory.
  static std::shared_ptr<const CudaWeights> upload(std::shared_ptr<const Model> model,
                                                   int device);
  ~CudaWeights();
  CudaWeights(const CudaWeights&) = delete;
  CudaWeights& operator=(const CudaWeights&) = delete;

  const Model& model() const { return *model_; }
  const std::shared_ptr<const Model>& model_ptr() const { return model_; }
  const DeviceInfo& device() const;
  std::string device_name() const;  // "NVIDIA H200"
  size_t device_bytes() const;

  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  CudaWeights(std::shared_ptr<const Model> model, int device);
  std::shared_ptr<const Model> model_;
  std::unique_ptr<Impl> impl_;
};

// Decode's kernel choices for the whole process, as CHANNEL_CUDA_MATVEC, CHANNEL_CUDA_FUSE,
// CHANNEL_CUDA_PDL, CHANNEL_CUDA_DECODE_ATTN and CHANNEL_CUDA_HOST_LOGITS set them
// (cuda_kernels.h): the one-token product's variant (0..8), the fused activation stages,
// programmatic dependent launch, the one-kernel attention and the LM head writing the logits
// to the host. A session captures them with its decode graph, so they apply to sessions made
// after. `spec`: "vN", then any of "f" (fused), "p" (PDL), "a" (one-kernel attention), "h"
// (host logits), "w" (W_o's input from attention in every form) and "s" (ahead slot
// attention), then any "+role:vN" (per-product variants, set_role_variants in
// cuda_kernels.h), e.g. "v6fpa" or "v8fph+output:v6"; a letter left out is off (the defaults
// are "v8fph" for Q8_0). A bad spec is a one-line error.
void set_decode_kernels(const std::string& spec);

struct CudaSessionConfig {
  int n_ctx = 4096;    // KV slots
  int n_batch = 512;   // tokens per forward chunk of a long prompt
  bool graphs = true;  // capture steps of up to kVerifyTokens tokens as CUDA graphs
};

class CudaSession {
 public:
  CudaSession(std::shared_ptr<const CudaWeights> weights, CudaSessionConfig config);
  ~CudaSession();
  CudaSession(const CudaSession&) = delete;
  CudaSession& operator=(const CudaSession&) = delete;

  // As Session::decode / decode_all / truncate_last / reset (runtime/session.h). The bounded
  // layers' rings live on the device, mirrored by host BoundedStates (their undo history):
  // truncate_last(k) fails, state unchanged, when k exceeds it (UNDO_DEPTH).
  // decode's logits are always the page-locked row logits_memory() (n_vocab floats, for the
  // session's lifetime), which decode_all also leaves holding its last token's.
  std::span<const float> decode(std::span<const int32_t> tokens);
  float* logits_memory();
  std::vector<float> decode_all(std::span<const int32_t> tokens);
  // As Session::hidden_states: appends tokens and writes each one's final-norm hidden state
  // (what the LM head reads) to rows, [n][n_embd]; no logits. Text embeddings on the device.
  void hidden_states(std::span<const int32_t> tokens, std::vector<float>& rows);
  void truncate_last(int k);
  void reset();
  int n_past() const { return n_past_; }
  // As Session::verify_capacity: a call of at most this many tokens can be cut back by
  // truncate_last (n_ctx; UNDO_DEPTH + 1 with bounded layers, as their undo history allows).
  int verify_capacity() const;
  bool has_bounded_layers() const;
  int n_ctx() const { return config_.n_ctx; }
  const Model& model() const { return weights_->model(); }
  size_t device_bytes() const;  // KV arena, activations and step buffers

 private:
  struct State;
  void check(std::span<const int32_t> tokens) const;
  void run_chunk(std::span<const int32_t> tokens, bool all_logits, float* logits_out);
  void run_step(int n, bool all_logits, bool graph_step, float* logits_out);
  bool enqueue_forward(int n, bool all_logits, float* pinned_logits);

  std::shared_ptr<const CudaWeights> weights_;
  CudaSessionConfig config_;
  std::unique_ptr<State> st_;
  int n_past_ = 0;
};

}  // namespace channel::cuda
