// Session: the per-conversation state over a shared, read-only Model: the KV cache, the
// activations scratch, the thread pool and the position counter. Never shared between threads.
// Tokens are appended at positions n_past, n_past+1, ...; slot i holds position i, and a
// query sees every earlier slot (or, on a sliding layer, the last sliding_window of them).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "model/forward.h"
#include "model/kv_cache.h"
#include "model/model.h"

namespace channel {

struct SessionConfig {
  int n_ctx = 4096;   // KV slots, the most tokens the session holds
  int n_threads = 0;  // 0: one per hardware thread
  int n_batch = 512;  // tokens per forward() chunk when decoding a long prompt
};

class Session {
 public:
  Session(std::shared_ptr<const Model> model, SessionConfig config);

  // Appends tokens at n_past.. and returns the logits of the last one [n_vocab]; the span
  // stays valid until the next call. Throws channel::Error for an empty list, a token id
  // outside the vocabulary or more tokens than the context holds (state is then unchanged).
  std::span<const float> decode(std::span<const int32_t> tokens);
  // Same, returning the logits of every appended token: [n_tokens][n_vocab].
  std::vector<float> decode_all(std::span<const int32_t> tokens);

  // Forgets the last k tokens (a rejected speculative draft): n_past goes back by k and the
  // bounded layers restore the ring slots those tokens overwrote (KV slots of other layers are
  // simply overwritten later). Throws channel::Error, state unchanged, when k < 0, k > n_past
  // or k exceeds a bounded layer's undo history (UNDO_DEPTH).
  void truncate_last(int k);

  int n_past() const { return n_past_; }
  int n_ctx() const { return config_.n_ctx; }
  void reset() {
    n_past_ = 0;
    kv_.clear_bounded();  // bounded layers' rings restart empty
  }

  const Model& model() const { return *model_; }
  ThreadPool& threads() { return pool_; }
  // Ring state of bounded layer il (bounded architecture).
  const BoundedState& bounded_state(int il) const { return kv_.bounded(il); }

 private:
  void check(std::span<const int32_t> tokens) const;
  void run_chunk(std::span<const int32_t> tokens, LogitsFor which, float* logits);

  std::shared_ptr<const Model> model_;
  SessionConfig config_;
  ThreadPool pool_;
  KvCache kv_;
  ForwardScratch scratch_;
  std::vector<int32_t> slot_ids_;  // [n_ctx] 0, 1, 2, ...: slot == position
  std::vector<float> logits_;      // [n_vocab] last-token logits
  int n_past_ = 0;
};

}  // namespace channel
