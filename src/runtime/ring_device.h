// Where a ring session's forward runs: RingSessionConfig::compute for a device named on the
// command line or in the C API (backend/device.h). The CPU needs nothing; `cuda[:N]` uploads
// the model to that CUDA device when the session is made (backend/cuda/cuda_ring.h). This
// file is compiled with CHANNEL_HAS_CUDA where the backend is built (cmake/cuda.cmake), so
// the rest of runtime/ is the same with and without it.
#pragma once

#include "backend/device.h"
#include "model/ring_compute.h"

namespace channel {

// Empty for the CPU; for CUDA a factory whose call makes the device ring (a one-line
// channel::Error then when there is no driver or device, or the model does not fit or is
// not supported there). Throws channel::Error (one line) for CUDA in a build without it.
RingComputeFactory ring_compute_for(const DeviceSpec& device);

}  // namespace channel
