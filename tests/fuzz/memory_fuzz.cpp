// libFuzzer target for the .episodic.mem parser: any bytes go through verify_store, and
// through EpisodicStore::open on an in-memory file (memfd), then every accessor: list, read,
// rehydrate, a device recall's view of the planes as stored (with_stored_kv, every plane read
// and the record checked from their CRC-32C), query, and a version 2 or 3 store's retrieval
// queries (with the lexical half).
// Only channel::Error may escape; anything else is a bug.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "memory/episodic_store.h"
#include "memory/episodic_view.h"
#include "util/error.h"
#include "util/hash.h"

namespace {

volatile uint64_t g_sink;

void exercise(const std::string& path) {
  channel::StoreOptions o;
  o.read_only = true;
  const channel::EpisodicStore s = channel::EpisodicStore::open(path, o);
  const channel::StoreLayout& L = s.layout();
  uint64_t h = s.total_episodes() + s.live_count();
  // Bound the work per input: the parser accepts any geometry that fits the file.
  if (static_cast<uint64_t>(L.hidden_size) > (1u << 16) || L.kv_dim > (1u << 16)) return;
  for (const channel::EpisodeHeader& e : s.list()) {
    try {
      const channel::Episode ep = s.read(e.episode_id);
      h += ep.tokens.size() + ep.summary.size() + static_cast<uint64_t>(ep.kv.size());
      std::vector<float> k(ep.kv.size() / 2), v(ep.kv.size() / 2);
      channel::RotaryDims r;
      if (L.kv_dim % 2 == 0) {
        r = channel::RotaryDims::make(channel::RopeStyle::neox, 1, L.kv_dim, L.kv_dim, 10000.0);
        s.rehydrate(e.episode_id, {&r, 1}, 17.0, k.data(), v.data());
      }
    } catch (const channel::Error&) {
    }
    try {
      s.with_stored_kv(e.episode_id, [&](const channel::StoredKvF16& src) {
        std::vector<uint32_t> crc(src.n_planes);
        for (size_t p = 0; p < crc.size(); ++p)
          crc[p] = channel::crc32c(0, src.planes + p * src.plane_values(), src.plane_values() * 2);
        if (e.episode_id % 2 == 1) src.prepare();  // the head read ahead, as a device does
        src.verify(crc);
        h += src.n_tokens;
      });
    } catch (const channel::Error&) {
    }
  }
  std::vector<float> q(L.hidden_size, 1.0f);
  for (const channel::RecallHit& hit : s.query(q, 3)) h += hit.episode_id;
  // Version 2: the retrieval section's queries (each entry checked once, damaged ones skipped).
  if (L.has_keys() && L.keys_values() <= (1u << 16)) {
    std::vector<float> keys(L.keys_values() / L.keys_per_head, 0.5f);
    channel::RetrievalCue cue;
    cue.method = channel::RecallMethod::keys;
    cue.queries = keys;
    for (const channel::RecallHit& hit : s.query_retrieval(cue, 3)) h += hit.episode_id;
    // With a lexical cue: the lexical index, from a version 3 file's lexical section (damaged
    // entries read from their records) or from every record.
    const std::vector<int32_t> words{1, 2, 3, 1000, -5};
    cue.tokens = words;
    cue.lexical = 8.0f;
    for (const channel::RecallHit& hit : s.query_retrieval(cue, 3)) h += hit.episode_id;
    cue.tokens = {};
    cue.lexical = 0.0f;
    cue.method = channel::RecallMethod::hybrid;
    cue.centroid = q;
    for (const channel::RecallHit& hit : s.query_retrieval(cue, 3)) h += hit.episode_id;
  }
  if (L.has_proj()) {
    std::vector<float> c(L.proj_dim, 0.25f);
    channel::RetrievalCue cue;
    cue.method = channel::RecallMethod::proj;
    cue.proj = c;
    for (const channel::RecallHit& hit : s.query_retrieval(cue, 3)) h += hit.episode_id;
  }
  g_sink = h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<uint8_t> bytes(data, data + size);  // 2-byte aligned, as a mapping is
  const channel::VerifyReport r = channel::verify_store(bytes.data(), bytes.size(), "fuzz.mem");
  g_sink = r.problems.size() + r.notes.size() + r.live;
  const int fd = ::memfd_create("fuzz.mem", 0);
  if (fd < 0) return 0;
  if (size == 0 || ::write(fd, data, size) == static_cast<ssize_t>(size)) {
    try {
      exercise("/proc/self/fd/" + std::to_string(fd));
    } catch (const channel::Error&) {
    }
  }
  ::close(fd);
  return 0;
}
