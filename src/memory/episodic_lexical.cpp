// EpisodicStore's lexical index, the sparse half of recall (memory/lexical_index.h): built from
// the lexical section of a version 3 store, a few contiguous reads however many episodes it
// holds (docs/memory-format.md, "Lexical section"), or from each episode's record in older versions
// (one read per episode), then kept current by id as episodes come and go.
#include <sys/uio.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "memory/episodic_store_impl.h"

namespace channel {

void EpisodicStore::Impl::index_from_record(uint32_t slot, const EpisodeHeader& h) const {
  thread_local std::vector<int32_t> tokens;
  const uint32_t n = std::min<uint32_t>(h.token_count, L.max_tokens);
  tokens.resize(n);
  if (n > 0) {
    iovec iov{tokens.data(), 4ull * n};
    preadv_all(&iov, 1, L.block_offset(slot) + L.block_tokens);
  }
  lex.set(slot, h.episode_id, tokens);
}

void EpisodicStore::Impl::index_from_section(std::span<const LexMissing> missing) const {
  constexpr uint64_t kChunk = 1u << 20;
  const uint64_t per_read = std::max<uint64_t>(1, kChunk / L.lex_entry_bytes);
  std::vector<uint8_t> buf;
  std::vector<int32_t> tokens;
  for (size_t i = 0; i < missing.size();) {
    // The entries from missing[i] on that one read of at most kChunk bytes covers.
    const uint32_t first = missing[i].slot;
    size_t j = i;
    while (j < missing.size() && missing[j].slot - first < per_read) ++j;
    buf.resize((missing[j - 1].slot - first + 1ull) * L.lex_entry_bytes);
    iovec iov{buf.data(), buf.size()};
    preadv_all(&iov, 1, L.lex_entry_offset(first));
    for (; i < j; ++i) {
      const LexMissing& m = missing[i];
      const uint8_t* e = buf.data() + (m.slot - first) * L.lex_entry_bytes;
      if (auto p = lexical_entry_problem(L, m.h, m.slot, e)) {
        // A reader beside the writer: an entry rewritten since this process indexed its slot
        // belongs to a newer episode, not a damaged one; it is indexed once seen.
        if (options.read_only && !holds_expected(m.slot)) continue;
        std::fprintf(stderr,
                     "channel: warning: episodic: %s: %s; recall reads its tokens from the "
                     "record instead\n",
                     path.c_str(), p->c_str());
        index_from_record(m.slot, m.h);
        continue;
      }
      LexicalEntryHeader x;
      std::memcpy(&x, e, sizeof x);
      tokens.resize(x.count);
      std::memcpy(tokens.data(), e + sizeof x, 4ull * x.count);
      lex.set(m.slot, x.episode_id, tokens);
    }
  }
}

std::vector<float> EpisodicStore::Impl::lexical_scores(std::span<const int32_t> cue,
                                                      std::span<const uint32_t> slots,
                                                      std::span<const uint64_t> ids) const {
  std::lock_guard lock(lex_mu);
  std::vector<uint8_t> live(L.max_episodes, 0);
  std::vector<LexMissing> missing;  // ascending, as slots are
  for (size_t i = 0; i < slots.size(); ++i) {
    live[slots[i]] = 1;
    if (!lex.current(slots[i], ids[i])) missing.push_back({slots[i], {}});
  }
  // Their index headers, through the mapping, unmapped chunk by chunk.
  for (size_t i = 0; i < missing.size(); i += kScanChunk) {
    const size_t end = std::min(missing.size(), i + kScanChunk);
    for (size_t j = i; j < end; ++j) missing[j].h = header_at(missing[j].slot);
    unmap_entry_run(missing[i].slot, missing[end - 1].slot);
  }
  if (L.has_lexical()) {
    index_from_section(missing);
  } else {
    for (const LexMissing& m : missing) index_from_record(m.slot, m.h);
  }
  for (uint32_t slot = 0; slot < L.max_episodes; ++slot)  // removed or replaced since
    if (!live[slot]) lex.clear(slot);
  return lex.score(cue, slots);
}

}  // namespace channel
