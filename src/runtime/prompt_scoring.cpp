// Scoring a prompt's tokens (prompt_scoring.h).
#include "runtime/prompt_scoring.h"

#include <algorithm>

#include "model/model.h"
#include "runtime/session.h"
#include "util/error.h"

namespace channel {

namespace {

// Every token but the last is run: its row scores the next one. Chunks of 64 rows keep the
// logits at 64 x n_vocab floats whatever the prompt's length.
constexpr size_t kChunk = 64;

void check_ids(std::span<const int32_t> tokens, size_t n_vocab) {
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || static_cast<size_t>(tokens[i]) >= n_vocab)
      throw_error("score: token id {} at index {} is outside the vocabulary (n_vocab {})",
                  tokens[i], i, n_vocab);
}

}  // namespace

std::vector<StepLogprobs> score_prompt(SessionBase& session, std::span<const int32_t> tokens,
                                       size_t top_n) {
  const size_t n_vocab = static_cast<size_t>(session.n_vocab());
  check_ids(tokens, n_vocab);
  std::vector<StepLogprobs> out(tokens.size());
  if (tokens.size() < 2) return out;
  session.reset();
  const size_t n_run = tokens.size() - 1;
  for (size_t a = 0; a < n_run; a += kChunk) {
    const size_t n = std::min(kChunk, n_run - a);
    const std::span<const float> rows = session.decode_all(tokens.subspan(a, n));
    for (size_t j = 0; j < n; ++j)
      out[a + j + 1] = step_logprobs(rows.subspan(j * n_vocab, n_vocab), tokens[a + j + 1], top_n);
  }
  return out;
}

std::vector<StepLogprobs> score_prompt(std::shared_ptr<const Model> model,
                                       std::span<const int32_t> tokens, size_t top_n,
                                       int n_threads) {
  check_ids(tokens, static_cast<size_t>(model->hparams().n_vocab));
  if (tokens.size() < 2) return std::vector<StepLogprobs>(tokens.size());
  SessionConfig config;
  config.n_ctx = static_cast<int>(tokens.size() - 1);
  config.n_threads = n_threads;
  config.n_batch = static_cast<int>(kChunk);
  Session session(std::move(model), config);
  return score_prompt(session, tokens, top_n);
}

}  // namespace channel
