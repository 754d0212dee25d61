// Scoring a prompt's tokens (prompt_scoring.h).
#include "runtime/prompt_scoring.h"

#include <algorithm>

#include "model/model.h"
#include "runtime/session.h"
#include "util/error.h"

namespace channel {

std::vector<StepLogprobs> score_prompt(std::shared_ptr<const Model> model,
                                       std::span<const int32_t> tokens, size_t top_n,
                                       int n_threads) {
  std::vector<StepLogprobs> out(tokens.size());
  const size_t n_vocab = static_cast<size_t>(model->hparams().n_vocab);
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || static_cast<size_t>(tokens[i]) >= n_vocab)
      throw_error("score: token id {} at index {} is outside the vocabulary (n_vocab {})",
                  tokens[i], i, n_vocab);
  if (tokens.size() < 2) return out;
  // Every token but the last is run: its row scores the next one. Chunks of 64 rows keep the
  // logits at 64 x n_vocab floats whatever the prompt's length.
  constexpr size_t kChunk = 64;
  const size_t n_run = tokens.size() - 1;
  SessionConfig config;
  config.n_ctx = static_cast<int>(n_run);
  config.n_threads = n_threads;
  config.n_batch = static_cast<int>(kChunk);
  Session session(std::move(model), config);
  for (size_t a = 0; a < n_run; a += kChunk) {
    const size_t n = std::min(kChunk, n_run - a);
    const std::span<const float> rows = session.decode_all(tokens.subspan(a, n));
    for (size_t j = 0; j < n; ++j)
      out[a + j + 1] = step_logprobs(rows.subspan(j * n_vocab, n_vocab), tokens[a + j + 1], top_n);
  }
  return out;
}

}  // namespace channel
