// HostPins: page locks (cudaHostRegister, read-only) on host memory the engine does not own
// but reads from often, such as the episodic store's mapping, so that the device copies
// recalled episodes straight from the page cache by DMA. Locked as they are first needed, in
// runs of 2 MiB chunks (the chunks a request lacks, one registration a run of consecutive
// ones), and kept, the least recently used run unlocked first, within a byte budget: locked
// pages cannot be reclaimed, so the budget bounds what this takes from the host.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>

namespace channel::cuda {

class HostPins {
 public:
  // Locks [p, p + bytes) (false: refused) and unlocks a range by its start: cudaHostRegister
  // (read-only) and cudaHostUnregister unless given (tests count them instead).
  using LockFn = std::function<bool(void* p, size_t bytes)>;
  using UnlockFn = std::function<void(void* p)>;
  // budget_bytes: CHANNEL_CUDA_PIN_MIB (MiB; 0: never lock) when set, else 1 GiB.
  HostPins();
  HostPins(size_t budget_bytes, LockFn lock, UnlockFn unlock);
  ~HostPins();
  HostPins(const HostPins&) = delete;
  HostPins& operator=(const HostPins&) = delete;

  // Locked ranges are unions of chunks of this many bytes at this alignment (clipped to their
  // region): a copy that takes one chunk at a time takes each from one locked range.
  static constexpr size_t kChunkBytes = size_t{2} << 20;

  // Locks the chunks of [region, region + region_bytes) that cover [p, p + bytes), unlocking
  // the least recently used other runs when over the budget. False when they cannot all be
  // locked (more than the budget, or the driver refuses read-only locks of that memory): the
  // caller then copies another way.
  bool cover(const void* p, size_t bytes, const void* region, size_t region_bytes);
  // Bytes locked in one registration from p on (to the end of p's run); 0 when p is not
  // locked. A copy of at most that many bytes from p reads one locked range.
  size_t locked_from(const void* p) const;
  // Unlocks every run of the region that begins at `region`.
  void forget(const void* region);
  size_t locked_bytes() const { return locked_; }

 private:
  struct Run {
    uintptr_t begin = 0;  // the locked range, inside its region
    size_t bytes = 0;
    uintptr_t first = 0, last = 0;  // its chunks' aligned addresses
    const void* region = nullptr;
    uint64_t used = 0;
  };
  void unlock(std::map<uintptr_t, Run>::iterator it);

  LockFn lock_;
  UnlockFn unlock_;
  std::map<uintptr_t, Run> runs_;         // by their first chunk's address
  std::map<uintptr_t, uintptr_t> chunk_;  // chunk address -> its run's key
  size_t budget_ = 0, locked_ = 0;
  uint64_t tick_ = 0;
  bool refused_ = false;  // the driver refused once: no more tries
};

}  // namespace channel::cuda
