// The slot ring on a CUDA device: a RingCompute (model/ring_compute.h) that runs a
// RingSession's forward with the K/V of every layer in device memory, allocated once per
// session: global layers hold all n_slots slots of the fixed geometry (anchors, window and
// the recall tier), sliding layers their LocalRing's. Per forward chunk only the step goes to
// the device: token ids, clocks, slots and each query's runs of the active-slot table (the
// distinct slot ids they point at, a few KB); the logits (and, for a token tap, the last
// residuals) come back. Decode of one token replays a captured CUDA graph.
// This header needs no CUDA headers, so frontends include it with the plain C++ compiler.
#pragma once

#include <memory>

#include "backend/cuda/cuda_session.h"
#include "model/ring_compute.h"

namespace channel::cuda {

// RingSessionConfig::compute for device `device`: the weights are uploaded when the session
// is made (one-line channel::Error when the device cannot run the model).
RingComputeFactory ring_compute(int device, bool graphs = true);
// The same over weights already uploaded (sessions of one model share them).
RingComputeFactory ring_compute(std::shared_ptr<const CudaWeights> weights, bool graphs = true);

}  // namespace channel::cuda
