// Text embeddings (POST /v1/embeddings, `channel embed`): a text's tokens run through a
// fresh contiguous session, the final-norm hidden state of each (what the LM head reads)
// averaged and scaled to unit length. That is how episodic memory makes an episode's
// centroid and a text cue (text_cue.h), so an embedding of a question lies in the
// space recall searches. A leading BOS is run but not averaged.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "runtime/session.h"

namespace channel {

class Model;

class Embedder {
 public:
  Embedder(std::shared_ptr<const Model> model, int n_threads);
  // The unit embedding of `tokens` ([n_embd]). Throws channel::Error for no tokens (or only
  // a BOS) or an id outside the vocabulary. The session grows to the longest input so far.
  std::vector<float> embed(std::span<const int32_t> tokens);
  int dim() const;

 private:
  std::shared_ptr<const Model> model_;
  int n_threads_;
  std::unique_ptr<Session> session_;
  std::vector<float> rows_;  // [n][n_embd] of the last input
};

}  // namespace channel
