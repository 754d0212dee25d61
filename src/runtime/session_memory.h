// What a RingSession of a given geometry allocates up front, and the check that it fits in
// the machine: a --slots far too large is refused, with the number, before any allocation
// (instead of the process being killed for memory, or swapping for minutes).
#pragma once

#include <cstdint>

#include "model/hparams.h"
#include "runtime/ring_session.h"

namespace channel {

// Bytes of the K/V arenas (f32 window and anchors, f16 recall tier) of every global and
// sliding layer, plus the per-slot bookkeeping of the ring (and its saved copy). Scratch
// that does not grow with the slots is left out.
uint64_t ring_session_bytes(const ModelHparams& hp, const RingSessionConfig& config);

// Physical memory of the machine (sysconf), 0 when unknown.
uint64_t physical_memory_bytes();

// Throws channel::Error naming both sizes when ring_session_bytes() exceeds the physical
// memory: "session: 10000000 slots need 37.3 GiB of K/V for this model, more than the 7.8 GiB
// of memory this machine has (lower --slots)".
void check_session_fits_memory(const ModelHparams& hp, const RingSessionConfig& config);

}  // namespace channel
