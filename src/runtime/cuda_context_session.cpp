#include "runtime/cuda_context_session.h"

#if defined(CHANNEL_HAS_CUDA)

#include <algorithm>

#include "util/error.h"

namespace channel {

CudaContextSession::CudaContextSession(std::shared_ptr<const Model> model, int device, int n_ctx,
                                       int n_threads)
    : CudaContextSession(cuda::CudaWeights::upload(model, device), n_ctx, n_threads) {}

CudaContextSession::CudaContextSession(std::shared_ptr<const cuda::CudaWeights> weights, int n_ctx,
                                       int n_threads)
    : SessionBase(weights->model_ptr(), weights->model().hparams().n_vocab, n_threads),
      weights_(std::move(weights)),
      gpu_(weights_, cuda::CudaSessionConfig{.n_ctx = n_ctx}) {
  use_logits_memory(gpu_.logits_memory());  // decode's row: nothing copied a token
}

void CudaContextSession::hidden_states(std::span<const int32_t> tokens, std::vector<float>& rows) {
  check_tokens(tokens);
  gpu_.hidden_states(tokens, rows);
}

void CudaContextSession::check_room(size_t n) const {
  if (n > static_cast<size_t>(room()))
    throw_error("context full: {} tokens already held + {} new exceed n_ctx {}", gpu_.n_past(), n,
                gpu_.n_ctx());
}

void CudaContextSession::run(std::span<const int32_t> tokens, float* all) {
  if (all == nullptr) {
    const std::span<const float> l = gpu_.decode(tokens);
    if (l.data() != logits_.data()) std::copy(l.begin(), l.end(), logits_.begin());
  } else {
    const std::vector<float> l = gpu_.decode_all(tokens);
    std::copy(l.begin(), l.end(), all);
  }
}

}  // namespace channel

#endif  // CHANNEL_HAS_CUDA
