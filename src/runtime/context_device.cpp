#include "runtime/context_device.h"

#include <fmt/format.h>

#include "runtime/session.h"
#include "util/error.h"

#if defined(CHANNEL_HAS_CUDA)
#include "runtime/cuda_context_session.h"
#endif

namespace channel {

ContextSession context_session_for(std::shared_ptr<const Model> model, const DeviceSpec& device,
                                   int n_ctx, int n_threads) {
  if (!device.is_cuda())
    return {std::make_unique<Session>(std::move(model),
                                      SessionConfig{.n_ctx = n_ctx, .n_threads = n_threads}),
            "cpu"};
#if defined(CHANNEL_HAS_CUDA)
  auto gpu = std::make_unique<CudaContextSession>(std::move(model), device.index, n_ctx, n_threads);
  std::string where = fmt::format("{} ({})", device.name(), gpu->device_name());
  return {std::move(gpu), std::move(where)};
#else
  throw_no_cuda_backend(device.name());
#endif
}

}  // namespace channel
