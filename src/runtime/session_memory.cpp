#include "runtime/session_memory.h"

#include <unistd.h>

#include <algorithm>

#include "util/error.h"

namespace channel {
namespace {

// slot_clock (8 bytes) and the slot identity (16), in the live ring and its saved copy.
constexpr uint64_t kRingBytesPerSlot = 2 * (8 + 16);

std::string gib(uint64_t bytes) {
  return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
}

}  // namespace

uint64_t ring_session_bytes(const ModelHparams& hp, const RingSessionConfig& config) {
  const uint64_t row = uint64_t(hp.n_head_kv) * uint64_t(hp.head_dim);  // one token, K or V
  const uint64_t n_slots = config.ring.n_slots;
  const uint64_t n_recall = std::min<uint64_t>(config.ring.n_recall, n_slots);
  const uint64_t local =
      hp.sliding_window > 0
          ? uint64_t(hp.sliding_window) +
                std::max<uint64_t>(config.ring.probe_reserve, uint64_t(std::max(config.n_batch, 1)))
          : 0;
  uint64_t bytes = n_slots * kRingBytesPerSlot;
  for (int il = 0; il < hp.n_layer; ++il) {
    if (hp.is_bounded(il)) continue;
    if (hp.is_sliding(il)) {
      bytes += 2 * row * local * sizeof(float);
    } else {
      bytes += 2 * row * (n_slots - n_recall) * sizeof(float) + 2 * row * n_recall * 2;
    }
  }
  return bytes;
}

uint64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : 0;
}

void check_session_fits_memory(const ModelHparams& hp, const RingSessionConfig& config) {
  const uint64_t need = ring_session_bytes(hp, config), have = physical_memory_bytes();
  if (have > 0 && need > have)
    throw_error(
        "session: {} slots need {} of K/V for this model, more than the {} of memory this "
        "machine has (lower --slots)",
        config.ring.n_slots, gib(need), gib(have));
}

}  // namespace channel
