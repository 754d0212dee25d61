// Text embeddings: mean-pooled final-norm hidden states (text_embedding.h).
#include "memory/text_embedding.h"

#include "memory/consolidation.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace channel {

Embedder::Embedder(std::shared_ptr<const Model> model, int n_threads)
    : model_(std::move(model)), n_threads_(n_threads) {}

Embedder::Embedder(std::shared_ptr<const Model> model, HiddenStates hidden_states)
    : model_(std::move(model)), hidden_states_(std::move(hidden_states)) {}

int Embedder::dim() const {
  return model_->hparams().n_embd;
}

std::vector<float> Embedder::embed(std::span<const int32_t> tokens) {
  const Tokenizer& tok = model_->tokenizer();
  const size_t skip = !tokens.empty() && tokens[0] == tok.bos_id() ? 1 : 0;
  if (tokens.size() <= skip) throw Error("embedding: the input has no tokens");
  const size_t d = static_cast<size_t>(dim());
  if (hidden_states_) {
    hidden_states_(tokens, rows_);
    return centroid_of(std::span<const float>(rows_).subspan(skip * d), d);
  }
  const int n = static_cast<int>(tokens.size());
  if (!session_ || session_->n_ctx() < n) {
    session_.reset();  // the old K/V goes before the larger one is allocated
    SessionConfig c;
    c.n_ctx = std::max(n, 256);
    c.n_threads = n_threads_;
    session_ = std::make_unique<Session>(model_, c);
  }
  session_->reset();
  session_->hidden_states(tokens, rows_);
  return centroid_of(std::span<const float>(rows_).subspan(skip * d), d);
}

}  // namespace channel
