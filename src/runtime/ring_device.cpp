#include "runtime/ring_device.h"

#include "util/error.h"

#if defined(CHANNEL_HAS_CUDA)
#include "backend/cuda/cuda_ring.h"
#endif

namespace channel {

RingComputeFactory ring_compute_for(const DeviceSpec& device) {
  if (!device.is_cuda()) return {};
#if defined(CHANNEL_HAS_CUDA)
  return cuda::ring_compute(device.index);
#else
  throw_no_cuda_backend(device.name());
#endif
}

}  // namespace channel
