// Saving and restoring a SlotRing: the integer half of a session file (the K/V arenas,
// sampler and model identity are the session's). The bytes are little-endian and
// versioned; a load validates every field against the geometry and rebuilds the per-slot
// metadata, so a corrupt or mismatched state is a clear error, never a crash.
//
//   "CHKV" u32 version=1 | u32 n_slots n_recall probe_reserve cut_chunk | u8 sealed open
//   i8 pending (-1 = none) u8 0 | u64 clock oldest evicted_spans | u32 n_anchor_spans,
//   u32 n_window_spans, u32 n_episodes | spans: u8 type, u8[3] 0, u64 start, u64 end,
//   u32 start_slot, u32 count (anchor spans, then window spans oldest first) | episodes:
//   u64 id, u32 slot_begin, u32 count, u64 stored_pos (activation order)
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "kv/slot_ring.h"

namespace channel {

// Throws channel::Error during a probe (transient tokens are never saved).
std::vector<uint8_t> save_ring_state(const SlotRing& ring);

// `what` names the source in errors ("session.chs: kv state: ..."). With `expected`, a state
// saved under another geometry is an error before anything is allocated. The hook is not
// part of the state: set it again on the returned ring.
SlotRing load_ring_state(std::span<const uint8_t> bytes, std::string_view what,
                         const RingConfig* expected = nullptr);

}  // namespace channel
