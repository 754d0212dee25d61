// The lexical section of a version 3 store (docs/memory-format.md, "Lexical section"): a fresh open
// scores the lexical half of recall exactly as an index rebuilt from the records does (a
// version 2 store with the same episodes), also after the ring of slots wrapped; a damaged
// entry is read from its record instead, with one line on stderr, and verify reports it; a
// damaged section header is refused at open; the section needs a retrieval section.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "memory/episodic_store.h"
#include "memory/episodic_view.h"
#include "memory_test_util.h"
#include "util/error.h"

namespace channel {
namespace {

using test::ScratchDir;
using test::SyntheticEpisode;

StoreGeometry geometry(bool lexical, uint32_t max_episodes) {
  StoreGeometry g;
  g.num_layers = 2;
  g.hidden_size = 32;
  g.kv_dim = 16;
  g.max_episodes = max_episodes;
  g.max_tokens = 24;
  g.ext_kinds = kRetrievalKeys;
  g.head_dim = 8;
  g.keys_per_head = 2;
  g.lexical = lexical;
  return g;
}

// Episode i: tokens from a small vocabulary (so that document frequencies vary), repeats
// included; everything else synthetic.
EpisodeRecord episode(const StoreLayout& L, uint64_t i, SyntheticEpisode& keep) {
  keep = SyntheticEpisode(L, i, 4 + i % 21);
  std::mt19937 rng(static_cast<uint32_t>(i));
  for (auto& t : keep.tokens) t = static_cast<int32_t>(rng() % 300);
  return keep.record(i * 32);
}

struct Pair {
  ScratchDir dir;
  std::string v2, v3;
};

// The same episodes appended to a version 2 and a version 3 store (capacity slots each).
void fill(Pair& p, uint32_t capacity, uint64_t episodes) {
  p.v2 = p.dir.file("v2.mem");
  p.v3 = p.dir.file("v3.mem");
  StoreOptions o = test::not_durable();
  EpisodicStore a = EpisodicStore::create(p.v2, geometry(false, capacity), 9, o);
  EpisodicStore b = EpisodicStore::create(p.v3, geometry(true, capacity), 9, o);
  EXPECT_EQ(a.layout().version, 2u);
  EXPECT_EQ(b.layout().version, 3u);
  for (uint64_t i = 0; i < episodes; ++i) {
    SyntheticEpisode keep(a.layout(), 0, 1);
    a.append(episode(a.layout(), i, keep));
    b.append(episode(b.layout(), i, keep));
  }
}

std::vector<RecallHit> ask(const std::string& path, std::span<const int32_t> words) {
  StoreOptions o;
  o.read_only = true;
  const EpisodicStore s = EpisodicStore::open(path, o);  // a fresh process's view
  const StoreLayout& L = s.layout();
  std::vector<float> q(size_t{L.num_layers} * L.key_heads * L.head_dim, 0.0f);
  RetrievalCue cue;
  cue.method = RecallMethod::keys;
  cue.queries = q;  // every key score 0: the ranking is the lexical half's alone
  cue.tokens = words;
  cue.lexical = 1.0f;
  return s.query_retrieval(cue, 8);
}

void expect_same(const std::vector<RecallHit>& a, const std::vector<RecallHit>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].episode_id, b[i].episode_id) << "rank " << i;
    EXPECT_EQ(a[i].score, b[i].score) << "rank " << i;
  }
}

TEST(LexicalSection, FreshOpenScoresAsTheRecordsDo) {
  for (uint64_t episodes : {40u, 150u}) {  // 150 > 64 slots: evicted episodes replaced
    Pair p;
    fill(p, 64, episodes);
    for (const std::vector<int32_t>& words :
         {std::vector<int32_t>{3, 17, 250}, std::vector<int32_t>{1, 2, 3, 4, 5, 6, 299}}) {
      const auto want = ask(p.v2, words);
      ASSERT_FALSE(want.empty());
      EXPECT_GT(want[0].score, 0.0f);
      expect_same(ask(p.v3, words), want);
    }
  }
}

TEST(LexicalSection, DamagedEntryIsReadFromItsRecord) {
  Pair p;
  fill(p, 32, 20);
  StoreLayout L;
  {
    StoreOptions o;
    o.read_only = true;
    L = EpisodicStore::open(p.v3, o).layout();
  }
  std::vector<uint8_t> bytes = test::read_bytes(p.v3);
  bytes[L.lex_entry_offset(7) + 16] ^= 0x40;  // slot 7 holds episode 7: its first token id
  test::write_bytes(p.v3, bytes);
  const VerifyReport vr = verify_store(bytes.data(), bytes.size(), p.v3);
  ASSERT_EQ(vr.problems.size(), 1u);
  EXPECT_NE(vr.problems[0].find("lexical entry of episode 7 (slot 7): checksum mismatch"),
            std::string::npos)
      << vr.problems[0];
  const std::vector<int32_t> words{3, 17, 250, 42};
  testing::internal::CaptureStderr();
  const auto got = ask(p.v3, words);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("lexical entry of episode 7 (slot 7): checksum mismatch"), std::string::npos)
      << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  expect_same(got, ask(p.v2, words));
}

TEST(LexicalSection, DamagedSectionHeaderIsRefused) {
  Pair p;
  fill(p, 16, 4);
  StoreLayout L;
  {
    StoreOptions o;
    o.read_only = true;
    L = EpisodicStore::open(p.v3, o).layout();
  }
  std::vector<uint8_t> bytes = test::read_bytes(p.v3);
  bytes[L.lex_offset + 8] ^= 1;  // entry_bytes
  test::write_bytes(p.v3, bytes);
  try {
    (void)EpisodicStore::open(p.v3);
    FAIL() << "opened a store whose lexical section header is damaged";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lexical section: fields do not match"),
              std::string::npos)
        << e.what();
  }
  const std::vector<uint8_t> after = test::read_bytes(p.v3);
  EXPECT_TRUE(after == bytes);  // refused, never rewritten
}

TEST(LexicalSection, NeedsARetrievalSection) {
  StoreGeometry g = geometry(true, 8);
  g.ext_kinds = 0;
  EXPECT_THROW(make_layout(g, "test"), Error);
  const StoreLayout L = make_layout(geometry(true, 8), "test");
  EXPECT_EQ(L.lex_offset, L.ext_offset + 64 + 8 * L.ext_entry_bytes);
  EXPECT_EQ(L.lex_entry_bytes, 128u);  // round_up_64(16 + 4 x 24)
  EXPECT_EQ(L.file_size, L.lex_offset + 64 + 8 * L.lex_entry_bytes);
}

}  // namespace
}  // namespace channel
