// Where a contiguous context runs (`run --ctx N`, a draft model, perplexity, embeddings, prompt
// scoring): the CPU's Session, or for `cuda[:N]` a context on that device
// (runtime/cuda_context_session.h). As runtime/ring_device.h does for the ring, this file is
// compiled with CHANNEL_HAS_CUDA where the backend is built, so the rest of runtime/ is the
// same with and without it.
#pragma once

#include <memory>
#include <string>

#include "backend/device.h"
#include "runtime/session_base.h"

namespace channel {

struct ContextSession {
  std::unique_ptr<SessionBase> session;
  std::string where;  // "cpu", or the device and its name: "cuda:0 (NVIDIA H200)"
};

// A contiguous context of n_ctx tokens (n_threads: the CPU's compute threads, or the host
// threads of sampling on a device). On CUDA the model is uploaded (a one-line channel::Error
// when there is no driver or device, or it does not fit or is not supported there); CUDA in
// a build without the backend is a one-line channel::Error too.
ContextSession context_session_for(std::shared_ptr<const Model> model, const DeviceSpec& device,
                                   int n_ctx, int n_threads);

}  // namespace channel
