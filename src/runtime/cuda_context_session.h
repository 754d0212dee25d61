// CudaContextSession: the contiguous context on a CUDA device (backend/cuda/cuda_session.h) as a
// SessionBase, so `channel run --ctx N --device cuda` goes through the one generation loop
// (runtime/generate.h), and perplexity, embeddings and prompt scoring run there too. Declared
// only where CHANNEL_HAS_CUDA is defined: runtime/context_device.cpp and this file's .cpp are
// the files of runtime/ compiled with it (cmake/cuda.cmake); the rest of runtime/ is the same
// with and without CUDA. Most callers want context_session_for (runtime/context_device.h).
#pragma once

#if defined(CHANNEL_HAS_CUDA)

#include <memory>
#include <span>

#include "backend/cuda/cuda_session.h"
#include "runtime/session_base.h"

namespace channel {

class CudaContextSession final : public SessionBase {
 public:
  // Uploads the model to device `device` (one-line channel::Error when it cannot) and
  // allocates the session's device memory once. n_threads: the host threads of sampling.
  CudaContextSession(std::shared_ptr<const Model> model, int device, int n_ctx, int n_threads);
  // Over weights already on a device (a server's, shared with its ring sessions).
  CudaContextSession(std::shared_ptr<const cuda::CudaWeights> weights, int n_ctx, int n_threads);

  int64_t room() const override { return gpu_.n_ctx() - gpu_.n_past(); }
  // decode_all's tokens can all be forgotten again (the device cache is plain slots), but for
  // the bounded layers' undo history.
  int verify_capacity() const override { return gpu_.verify_capacity(); }
  const char* verify_capacity_hint() const override {
    return gpu_.has_bounded_layers() ? "UNDO_DEPTH + 1" : "--ctx";
  }
  std::string device_name() const { return weights_->device_name(); }
  void reset() override { gpu_.reset(); }
  void hidden_states(std::span<const int32_t> tokens, std::vector<float>& rows) override;

 private:
  void check_room(size_t n) const override;
  void run(std::span<const int32_t> tokens, float* all) override;
  void truncate(int k) override { gpu_.truncate_last(k); }

  std::shared_ptr<const cuda::CudaWeights> weights_;
  cuda::CudaSession gpu_;
};

}  // namespace channel

#endif  // CHANNEL_HAS_CUDA
