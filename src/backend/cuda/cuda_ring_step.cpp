// The host side of a device ring step (see cuda_ring_step.h).
#include "backend/cuda/cuda_ring_step.h"

#include <algorithm>
#include <cstring>

#include "util/error.h"

namespace channel::cuda {

RingStepSizes build_ring_step(const RingChunk& c, size_t batch, int32_t* h, double* key_pos,
                              RingRun* runs, size_t runs_cap, uint32_t* table, size_t table_cap,
                              std::vector<RingStepRef>& refs) {
  const size_t n = c.tokens.size(), B = batch;
  const bool local = !c.local_runs.empty();
  refs.clear();
  size_t nr = 0;
  auto add_run = [&](const SlotRun& r) {
    if (nr >= runs_cap) throw_error("cuda ring: more than {} runs in one step", runs_cap);
    runs[nr] = RingRun{0, static_cast<int32_t>(r.count), r.rope_pos};
    const auto p = reinterpret_cast<uintptr_t>(r.slots);
    refs.push_back(RingStepRef{p, p + size_t{r.count} * sizeof(uint32_t), nr});
    ++nr;
  };
  for (size_t t = 0; t < n; ++t) {
    h[kTokens * B + t] = c.tokens[t];
    h[kGlobalSlot * B + t] = static_cast<int32_t>(c.global_slots[t]);
    h[kLocalSlot * B + t] = local ? static_cast<int32_t>(c.local_slots[t]) : 0;
    key_pos[t] = static_cast<double>(c.clocks[t]);
    h[kGlobalFirst * B + t] = static_cast<int32_t>(nr);
    int count = 0;
    for (const SlotRun& r : c.runs[t])
      if (r.count > 0) {
        add_run(r);
        ++count;
      }
    h[kGlobalCount * B + t] = count;
    h[kLocalFirst * B + t] = static_cast<int32_t>(nr);
    const bool has_local = local && c.local_runs[t].count > 0;
    h[kLocalCount * B + t] = has_local ? 1 : 0;
    if (has_local) add_run(c.local_runs[t]);
  }
  std::sort(refs.begin(), refs.end(),
            [](const RingStepRef& a, const RingStepRef& b) { return a.begin < b.begin; });
  size_t used = 0, off = 0;
  uintptr_t begin = 0, end = 0;
  bool open = false;
  auto flush = [&] {
    if (!open) return;
    const size_t len = (end - begin) / sizeof(uint32_t);
    if (off + len > table_cap)
      throw_error("cuda ring: the step's slot table needs more than {} entries", table_cap);
    std::memcpy(table + off, reinterpret_cast<const uint32_t*>(begin), len * sizeof(uint32_t));
    used = off + len;
  };
  for (const RingStepRef& r : refs) {
    if (!open || r.begin >= end) {  // a range apart from the previous ones: copied on its own
      flush();
      begin = r.begin;
      end = r.end;
      off = used;
      open = true;
    } else {
      end = std::max(end, r.end);
    }
    runs[r.run].first = static_cast<int32_t>(off + (r.begin - begin) / sizeof(uint32_t));
  }
  flush();
  return {nr, used};
}

}  // namespace channel::cuda
