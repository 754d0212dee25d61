// The step of a device ring chunk, built on the host (cuda_ring.cpp uploads it): the integer
// rows, each token's clock, the runs of every query and the active-slot table they index.
// Runs point into the ring's own slot lists (kv/slot_ring.h, kv/virtual_positions.h), so the
// runs of different queries overlap (one query's window is most of the next one's):
// overlapping ranges are merged and copied once, and each run keeps its offset in the copy.
// Host code over plain arrays, tested without a device (cuda_ring_test.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/cuda/cuda_kernels.h"
#include "model/ring_compute.h"

namespace channel::cuda {

// The step's integer rows, [kIntRows][batch] int32: token ids, the token's slot in global and
// in sliding layers, and where each query's runs begin in the run list and how many there
// are, for global and for sliding layers (0 or 1 run).
enum RingStepRow {
  kTokens = 0,
  kGlobalSlot,
  kLocalSlot,
  kGlobalFirst,
  kGlobalCount,
  kLocalFirst,
  kLocalCount,
  kIntRows
};

struct RingStepRef {  // scratch: one run's range of slot ids in host memory
  uintptr_t begin, end;
  size_t run;
};
struct RingStepSizes {
  size_t runs = 0;   // entries of `runs` written
  size_t table = 0;  // entries of `table` written
};

// Writes chunk c (c.tokens.size() <= batch) into rows [kIntRows][batch], key_pos [batch]
// (each token's clock), runs [runs_cap] and table [table_cap]. Runs with no slots are left
// out. Throws channel::Error when runs_cap or table_cap is too small.
RingStepSizes build_ring_step(const RingChunk& c, size_t batch, int32_t* rows, double* key_pos,
                              RingRun* runs, size_t runs_cap, uint32_t* table, size_t table_cap,
                              std::vector<RingStepRef>& scratch);

}  // namespace channel::cuda
