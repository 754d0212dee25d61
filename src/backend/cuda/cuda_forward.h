// The layer stack of a llama / gemma3 / qwen3 forward on the device, shared by the contiguous
// session (cuda_session.cpp) and the slot ring (cuda_ring.cpp): embedding, per layer norm ->
// Q/K/V product -> attention -> W_o -> residual -> norm -> FFN -> residual, then the final
// norm and the LM head. Attention is the one part a session's KV storage decides: the caller
// passes it as `attend`, which finds the layer's q|k|v rows in bufs.qkv and writes bufs.attn
// (or, offered a q8 buffer in decode's fused stages, W_o's Q8_0 input there).
// Internal to the backend (needs the CUDA runtime headers).
#pragma once

#include <cstdint>
#include <functional>

#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_weights_impl.h"

namespace channel::cuda {

// Activations of up to max_batch tokens, allocated once by the session.
struct ForwardBufs {
  float* x = nullptr;       // [n][n_embd] residual stream
  float* xn = nullptr;      // [n][n_embd]
  float* qkv = nullptr;     // [n][qkv_w] q | k | v
  float* attn = nullptr;    // [n][attn_w]
  float* proj = nullptr;    // [n][n_embd]
  float* gu = nullptr;      // [n][2 * n_ff] gate | up
  float* ff = nullptr;      // [n][n_ff]
  void* act = nullptr;      // the products' input form, widest row
  float* logits = nullptr;  // [n][n_vocab]
  int64_t qkv_w = 0, attn_w = 0;
  // [kNonfiniteBlocks] flags of the logits (nonfinite_flags), pinned host memory; none: no check.
  uint32_t* nonfinite = nullptr;
  // Where set (pinned host memory) and host_logits() is on, a step with one logits row may have
  // its LM head store that row at logits_host and a non-finite value's mark in *logits_bad
  // (matmul_logits_to_host) instead of the flags: enqueue_model then returns true.
  float* logits_host = nullptr;
  uint32_t* logits_bad = nullptr;
};

// Attention blocks per query for n queries: enough (KV head, split, token) blocks to fill
// the device twice, at most 64; a batch of at most kVerifyTokens splits each query as a single
// token (cuda_kernels.h).
int attention_splits(int n, int n_head_kv, int sm_count);

// Whether decode of one token may run the fused activation stages for these weights.
bool fused_decode_for(const WeightsLayout& w);

// A layer's attention: writes bufs.attn and returns false, or, when act is not null, may write
// that output to act in W_o's activation form instead (AttnArgs::out_act) and return true.
using AttendFn = std::function<bool(int il, void* act, ActForm form)>;

// Enqueues the forward of n tokens (device ids `tokens`) on cs: every layer, calling
// attend between the Q/K/V product and W_o, then the logits of the last n_out tokens
// into bufs.logits and their flags into bufs.nonfinite (n_out 0: no final norm nor LM head).
// Leaves every token's last residual in bufs.x. True when the LM head wrote the logits to
// bufs.logits_host itself (ForwardBufs::logits_host), so they need no copy back.
bool enqueue_model(const CudaWeights& weights, const ForwardBufs& bufs, const int32_t* tokens,
                   int n, int n_out, cudaStream_t cs, const AttendFn& attend);

}  // namespace channel::cuda
