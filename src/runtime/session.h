// Session: the contiguous context, a KV geometry that never evicts (runtime/session_base.h is
// the interface it shares with RingSession): the KV cache, the activations scratch and the
// position counter over a shared, read-only Model. Never shared between threads. Tokens are
// appended at positions n_past, n_past+1, ...; slot i holds position i, and a query sees every
// earlier slot (or, on a sliding layer, the last sliding_window of them).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "model/forward.h"
#include "model/layer_attention.h"
#include "model/model.h"
#include "runtime/session_base.h"

namespace channel {

struct SessionConfig {
  int n_ctx = 4096;   // KV slots, the most tokens the session holds
  int n_threads = 0;  // 0: one per hardware thread
  int n_batch = 512;  // tokens per forward() chunk when decoding a long prompt
};

class Session final : public SessionBase {
 public:
  Session(std::shared_ptr<const Model> model, SessionConfig config);

  // decode / decode_all (SessionBase) append tokens at n_past..; more tokens than the context
  // has room for are refused ("context full").
  // truncate_last(k) forgets the last k tokens: n_past goes back by k and the bounded layers
  // restore the ring slots those tokens overwrote (KV slots of other layers are simply
  // overwritten later). Throws channel::Error, state unchanged, when k < 0, k > n_past or k
  // exceeds a bounded layer's undo history (UNDO_DEPTH).

  int64_t room() const override { return config_.n_ctx - n_past_; }
  int verify_capacity() const override { return UNDO_DEPTH + 1; }
  const char* verify_capacity_hint() const override { return "UNDO_DEPTH + 1"; }

  int n_past() const { return n_past_; }
  int n_ctx() const { return config_.n_ctx; }
  void reset() override {
    n_past_ = 0;
    bounded_.clear();  // bounded layers' rings restart empty
  }

  // SessionBase::hidden_states; throws as decode does.
  void hidden_states(std::span<const int32_t> tokens, std::vector<float>& rows) override;
  // Ring state of bounded layer il (bounded architecture).
  const BoundedState& bounded_state(int il) const { return bounded_.state(il); }

 private:
  void check_room(size_t n) const override;
  void run(std::span<const int32_t> tokens, float* all) override;
  void truncate(int k) override;
  void run_chunk(std::span<const int32_t> tokens, LogitsFor which, float* logits);

  SessionConfig config_;
  ContiguousAttention attention_;   // the K/V of every layer but the bounded ones
  BoundedAttention bounded_;         // bounded layers' rings
  std::vector<LayerAttention*> layers_;  // [n_layer] which of the two each layer uses
  ForwardScratch scratch_;
  std::vector<int32_t> slot_ids_;  // [n_ctx] 0, 1, 2, ...: slot == position
  int n_past_ = 0;
};

}  // namespace channel
