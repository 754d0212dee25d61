// Text embeddings (POST /v1/embeddings, `channel embed`): a text's tokens run through a
// fresh contiguous session, the final-norm hidden state of each (what the LM head reads)
// averaged and scaled to unit length. That is how episodic memory makes an episode's
// centroid and a text cue (text_cue.h), so an embedding of a question lies in the
// space recall searches. A leading BOS is run but not averaged.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "runtime/session.h"

namespace channel {

class Model;

class Embedder {
 public:
  // Runs tokens from an empty context, each token's final-norm hidden state into rows
  // ([n][n_embd]): a device's session (channel embed --device cuda).
  using HiddenStates = std::function<void(std::span<const int32_t>, std::vector<float>&)>;

  // On the CPU: a contiguous Session of n_threads.
  Embedder(std::shared_ptr<const Model> model, int n_threads);
  Embedder(std::shared_ptr<const Model> model, HiddenStates hidden_states);
  // The unit embedding of `tokens` ([n_embd]). Throws channel::Error for no tokens (or only
  // a BOS) or an id outside the vocabulary. The session grows to the longest input so far.
  std::vector<float> embed(std::span<const int32_t> tokens);
  int dim() const;

 private:
  std::shared_ptr<const Model> model_;
  int n_threads_ = 0;
  HiddenStates hidden_states_;  // set: used instead of session_
  std::unique_ptr<Session> session_;
  std::vector<float> rows_;  // [n][n_embd] of the last input
};

}  // namespace channel
