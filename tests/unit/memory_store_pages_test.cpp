// The episodic store keeps no more of its file mapped in the process than a bound that does
// not grow with the episodes it holds or has read (docs/memory-format.md, "Resident pages"): every
// read through the mapping (read, find, list, the centroid query, the retrieval scan with its
// lexical half, rehydration) unmaps its pages again, and a scan unmaps as it goes. Measured on
// the mapping itself (its Rss in /proc/self/smaps), not by time.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "memory/episodic_store.h"
#include "memory/rerotate.h"
#include "memory_test_util.h"

namespace channel {
namespace {

using test::ScratchDir;
using test::SyntheticEpisode;

// 4,096 episodes of up to 32 tokens, 2 layers, with the retrieval sections `ext_kinds`.
StoreGeometry pages_geometry(uint32_t ext_kinds) {
  StoreGeometry g;
  g.num_layers = 2;
  g.hidden_size = 256;
  g.kv_dim = 128;
  g.max_episodes = 4096;
  g.max_tokens = 32;
  g.ext_kinds = ext_kinds;
  g.head_dim = 64;
  g.keys_per_head = 4;
  return g;
}

TEST(StorePages, ResidentMappingStaysBoundedAsEpisodesGrow) {
  ScratchDir dir;
  StoreOptions scratch = test::not_durable();
  const StoreGeometry g = pages_geometry(kRetrievalKeys);
  EpisodicStore store = EpisodicStore::create(dir.file("pages.mem"), g, 0x1234, scratch);
  const StoreLayout& L = store.layout();
  // The index table alone (2.4 MB) and a few records exceed the bound: a scan or a read that
  // left its pages mapped fails at once.
  constexpr uint64_t kBound = 1ull << 20;
  ASSERT_GT(L.slab_offset, 2 * kBound);

  const RotaryDims rope = RotaryDims::make(RopeStyle::neox, 2, 64, 64, 1e4);
  std::vector<float> k_out(size_t{L.num_layers} * L.max_tokens * L.kv_dim);
  std::vector<float> v_out(k_out.size());
  std::mt19937_64 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> q(L.hidden_size), queries(size_t{L.num_layers} * L.key_heads * L.head_dim);
  uint64_t seed = 0, parent = kNoEpisode;
  std::vector<uint64_t> resident;
  for (int round = 0; round < 12; ++round) {
    for (int i = 0; i < 320; ++i) {
      ++seed;
      const SyntheticEpisode ep(L, seed, 8 + seed % 25);
      parent = store.append(ep.record(seed * 64, parent));
    }
    for (auto& x : q) x = nd(rng);
    for (auto& x : queries) x = nd(rng);
    std::vector<RecallHit> hits = store.query(q, 3);  // a full scan, then the sketch
    hits = store.query(q, 3);
    hits = store.query(q, 3);
    RetrievalCue cue;
    cue.method = RecallMethod::keys;
    cue.queries = queries;
    const std::vector<int32_t> words = SyntheticEpisode(L, seed / 2, 16).tokens;
    cue.tokens = words;
    cue.lexical = 8.0f;
    const std::vector<RecallHit> by_keys = store.query_retrieval(cue, 3);
    hits.insert(hits.end(), by_keys.begin(), by_keys.end());
    for (int i = 0; i < 24; ++i) hits.push_back({rng() % store.total_episodes(), 0, 0.0f});
    for (const RecallHit& h : hits) {
      const Episode e = store.read(h.episode_id);
      EXPECT_EQ(e.header.episode_id, h.episode_id);
      ASSERT_TRUE(store.find(h.episode_id).has_value());
      store.rehydrate(h.episode_id, {&rope, 1}, 100.0, k_out.data(), v_out.data());
      store.record_access(h.episode_id, 1700000000000ull);
    }
    EXPECT_EQ(store.list().size(), store.live_count());
    resident.push_back(store.mapped_resident_bytes());
    EXPECT_LE(resident.back(), kBound) << "round " << round << ", " << store.live_count()
                                        << " episodes";
  }
  StoreOptions reader;
  reader.read_only = true;
  // And a store opened again (the index checks at open read the whole table).
  const EpisodicStore again = EpisodicStore::open(dir.file("pages.mem"), reader);
  EXPECT_EQ(again.live_count(), store.live_count());
  EXPECT_LE(again.mapped_resident_bytes(), kBound);
  (void)again.read(store.total_episodes() - 1);
  EXPECT_LE(again.mapped_resident_bytes(), kBound);
}

// While a scan runs, it holds only the chunks it is reading: a thread samples the mapping's
// Rss during repeated retrieval queries (proj, keys + lexical) and centroid queries over 4,096
// episodes whose retrieval section alone is 40 MB. A sample can miss a peak but never see
// more than there is, so the bound is checked, not a timing.
TEST(StorePages, ScansHoldOnlyTheChunkTheyRead) {
  ScratchDir dir;
  StoreOptions scratch = test::not_durable();
  StoreGeometry g = pages_geometry(kRetrievalKeys | kRetrievalProj);
  g.proj_dim = 128;
  g.lexical = true;
  EpisodicStore store = EpisodicStore::create(dir.file("scan.mem"), g, 0x1234, scratch);
  const StoreLayout& L = store.layout();
  // A chunk of 64 entries, and the page-cache folios that hold it (a fault maps a whole large
  // folio on newer kernels, up to 2 MiB, and tmpfs may use 2 MiB pages): a few of those.
  constexpr uint64_t kBound = 8ull << 20;
  ASSERT_GT(uint64_t{L.max_episodes} * L.ext_entry_bytes, 4 * kBound);
  for (uint64_t i = 0; i < L.max_episodes; ++i)
    store.append(SyntheticEpisode(L, i + 1, 32).record(i * 32));
  std::atomic<bool> done{false};
  std::atomic<uint64_t> peak{0}, samples{0};
  std::thread sampler([&] {
    while (!done.load()) {
      peak = std::max(peak.load(), store.mapped_resident_bytes());
      ++samples;
    }
  });
  std::mt19937_64 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> q(L.hidden_size), c(L.proj_dim),
      queries(size_t{L.num_layers} * L.key_heads * L.head_dim);
  const std::vector<int32_t> words{1, 2, 3, 4000, 17};
  for (int round = 0; round < 6; ++round) {
    for (auto& x : q) x = nd(rng);
    for (auto& x : c) x = nd(rng);
    for (auto& x : queries) x = nd(rng);
    RetrievalCue cue;
    cue.method = RecallMethod::proj;
    cue.proj = c;
    cue.tokens = words;
    cue.lexical = 8.0f;
    EXPECT_EQ(store.query_retrieval(cue, 3).size(), 3u);
    cue.method = RecallMethod::keys;
    cue.queries = queries;
    EXPECT_EQ(store.query_retrieval(cue, 3).size(), 3u);
    EXPECT_EQ(store.query(q, 3).size(), 3u);
  }
  done = true;
  sampler.join();
  EXPECT_GT(samples.load(), 0u);
  EXPECT_LE(peak.load(), kBound) << samples.load() << " samples";
  EXPECT_LE(store.mapped_resident_bytes(), kBound);
}

}  // namespace
}  // namespace channel
