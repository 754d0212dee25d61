// Acting on a store from outside its writer: readers that share the file with a writer in
// another process (never an error, never a torn episode), remove(), repair_store() (drops the
// damaged records, changes no other byte), and a read-only store's recalls writing nothing.
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <set>

#include <gtest/gtest.h>

#include "memory/episodic_repair.h"
#include "memory/episodic_store.h"
#include "memory/episodic_view.h"
#include "memory_test_util.h"

namespace channel {
namespace {

using test::read_bytes;
using test::ScratchDir;
using test::SyntheticEpisode;
using test::write_bytes;

constexpr uint64_t kModel = 0x5eed;

StoreGeometry geometry(uint32_t max_episodes) {
  StoreGeometry g;
  g.num_layers = 2;
  g.hidden_size = 16;
  g.kv_dim = 32;
  g.max_episodes = max_episodes;
  g.max_tokens = 6;
  return g;
}

StoreOptions reader() {
  StoreOptions o;
  o.read_only = true;
  return o;
}

size_t bytes_differing(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  size_t n = a.size() == b.size() ? 0 : SIZE_MAX;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) n += a[i] != b[i];
  return n;
}

// A child appends (wrapping the 6 slots many times) while the parent opens, lists and reads
// the store over and over: every open succeeds, and every read returns a whole episode whose
// content matches its seed, or says the writer replaced it.
TEST(MemoryShare, ReadersBesideAWriterInAnotherProcess) {
  ScratchDir dir;
  const std::string path = dir.file("shared.mem");
  StoreLayout L;
  {
    StoreOptions o = test::not_durable();
    EpisodicStore s = EpisodicStore::create(path, geometry(6), kModel, o);
    L = s.layout();
    for (uint64_t i = 0; i < 3; ++i) s.append(SyntheticEpisode(L, i, 1 + i % 6).record());
  }
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    StoreOptions o = test::not_durable();
    EpisodicStore s = EpisodicStore::open(path, o);
    for (uint64_t i = 3; i < 1500; ++i) s.append(SyntheticEpisode(L, i, 1 + i % 6).record());
    ::_exit(0);
  }
  int opens = 0, reads = 0, replaced = 0, errors = 0;
  std::string first_error;
  for (int status = 0; ::waitpid(child, &status, WNOHANG) == 0;) {
    try {
      const EpisodicStore s = EpisodicStore::open(path, reader());
      ++opens;
      for (const EpisodeHeader& h : s.list()) {
        try {
          const Episode e = s.read(h.episode_id);
          const SyntheticEpisode want(L, h.episode_id, 1 + h.episode_id % 6);
          ASSERT_EQ(e.tokens, want.tokens) << "episode " << h.episode_id;
          ++reads;
        } catch (const EpisodeReplaced&) {
          ++replaced;
        }
      }
    } catch (const Error& e) {
      if (errors++ == 0) first_error = e.what();
    }
  }
  EXPECT_EQ(errors, 0) << first_error;
  EXPECT_GT(opens, 0);
  EXPECT_GT(reads, 0);
  const auto bytes = read_bytes(path);
  const VerifyReport r = verify_store(bytes.data(), bytes.size(), path);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.problems[0]);
  std::printf("%d opens, %d reads, %d replaced while read\n", opens, reads, replaced);
}

TEST(MemoryShare, RemoveEmptiesOneSlotAndNothingElse) {
  ScratchDir dir;
  const std::string path = dir.file("rm.mem");
  {
    EpisodicStore s = EpisodicStore::create(path, geometry(4), kModel);
    for (uint64_t i = 0; i < 3; ++i) s.append(SyntheticEpisode(s.layout(), i, 3).record());
  }
  const auto before = read_bytes(path);
  {
    EpisodicStore s = EpisodicStore::open(path);
    s.remove(1);
    EXPECT_FALSE(s.find(1).has_value());
    EXPECT_THROW(s.remove(1), Error);
  }
  const auto after = read_bytes(path);
  EXPECT_GE(bytes_differing(before, after), 1u);
  EXPECT_LE(bytes_differing(before, after), 4u);
  const EpisodicStore s = EpisodicStore::open(path, reader());
  std::set<uint64_t> ids;
  for (const EpisodeHeader& h : s.list()) ids.insert(h.episode_id);
  EXPECT_EQ(ids, (std::set<uint64_t>{0, 2}));
  EXPECT_TRUE(verify_store(after.data(), after.size(), path).ok());
}

TEST(MemoryShare, RepairDropsTheDamagedRecordsOnly) {
  ScratchDir dir;
  const std::string path = dir.file("repair.mem");
  StoreLayout L;
  {
    EpisodicStore s = EpisodicStore::create(path, geometry(4), kModel);
    L = s.layout();
    for (uint64_t i = 0; i < 3; ++i) s.append(SyntheticEpisode(L, i, 4).record());
  }
  auto bytes = read_bytes(path);
  bytes[L.block_offset(1) + L.block_kv + 7] ^= 0x40;  // one K/V byte of episode 1
  write_bytes(path, bytes);
  const VerifyReport v = verify_store(bytes.data(), bytes.size(), path);
  EXPECT_EQ(v.damaged_episodes, std::vector<uint64_t>{1});

  const RepairReport dry = repair_store(path, /*dry_run=*/true);
  EXPECT_EQ(dry.dropped.size(), 1u);
  EXPECT_EQ(read_bytes(path), bytes);

  const RepairReport r = repair_store(path);
  ASSERT_EQ(r.dropped.size(), 1u);
  EXPECT_NE(r.dropped[0].find("episode 1"), std::string::npos) << r.dropped[0];
  EXPECT_EQ(r.kept, 2u);
  const auto repaired = read_bytes(path);
  EXPECT_LE(bytes_differing(bytes, repaired), 4u);
  EXPECT_TRUE(verify_store(repaired.data(), repaired.size(), path).ok());
  EXPECT_TRUE(repair_store(path).dropped.empty());
  EXPECT_EQ(read_bytes(path), repaired);

  // A writer holds the lock: repair waits for nobody and is refused.
  EpisodicStore writer = EpisodicStore::open(path);
  EXPECT_THROW(repair_store(path), Error);
}

TEST(MemoryShare, AReadOnlyStoreRecordsNoAccess) {
  ScratchDir dir;
  const std::string path = dir.file("ro.mem");
  {
    EpisodicStore s = EpisodicStore::create(path, geometry(4), kModel);
    s.append(SyntheticEpisode(s.layout(), 0, 2).record());
  }
  const auto before = read_bytes(path);
  EpisodicStore s = EpisodicStore::open(path, reader());
  s.record_access(0, 1234);
  EXPECT_EQ(s.find(0)->access_count, 0u);
  EXPECT_EQ(read_bytes(path), before);
}

}  // namespace
}  // namespace channel
