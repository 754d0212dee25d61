// EpisodicStore and the .episodic.mem format: byte offsets, round trips (FP16 and Q8_0), the
// circular write head with pinned episodes, lineage, access updates, top-k against brute
// force, and refusal of garbage, truncated, damaged and wrong-model files (left untouched).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "backend/cpu/thread_pool.h"
#include "memory/episodic_view.h"
#include "memory/memory_kernels.h"
#include "memory_test_util.h"
#include "ops/fp16.h"
#include "util/error.h"
#include "util/hash.h"

namespace channel {
namespace {

using test::read_bytes;
using test::ScratchDir;
using test::SyntheticEpisode;
using test::write_bytes;

StoreGeometry small_geometry(uint32_t max_episodes = 4, SlabType type = SlabType::f16) {
  StoreGeometry g;
  g.num_layers = 3;
  g.hidden_size = 24;
  g.kv_dim = 32;
  g.max_episodes = max_episodes;
  g.max_tokens = 5;
  g.slab_type = type;
  return g;
}

constexpr uint64_t kModel = 0x1234567890abcdefull;
template <typename T>
T at(const std::vector<uint8_t>& b, size_t off) {
  T v;
  std::memcpy(&v, b.data() + off, sizeof v);
  return v;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(MemoryStore, LayoutIsTheDocumentedOne) {
  StoreGeometry g;
  g.num_layers = 48;
  g.hidden_size = 3840;
  g.kv_dim = 1024;
  g.max_episodes = 16384;
  g.max_tokens = 64;
  const StoreLayout L = make_layout(g, "t");
  EXPECT_EQ(L.entry_bytes, 7744u);  // 64 + 7680, already a multiple of 64
  EXPECT_EQ(L.index_offset, 64u);
  EXPECT_EQ(L.slab_offset, 64u + 16384u * 7744u);
  EXPECT_EQ(L.row_bytes, 2048u);
  EXPECT_EQ(L.block_kv, 576u);  // 320 + 4 * 64 = 576
  EXPECT_EQ(L.block_stride, 576u + 2u * 48u * 64u * 2048u);
  EXPECT_EQ(L.block_stride % 64, 0u);
  g.slab_type = SlabType::q8_0;
  EXPECT_EQ(make_layout(g, "t").row_bytes, 1024u / 32u * 34u);
  g.hidden_size = 3;
  EXPECT_EQ(make_layout(g, "t").entry_bytes, 128u);  // 64 + 6 rounded up
  g.kv_dim = 33;
  EXPECT_NE(error_of([&] { make_layout(g, "t"); }).find("multiple of 32"), std::string::npos);
  g.max_episodes = 0xFFFFFFFF;
  g.num_layers = 0xFFFFFFFF;
  g.kv_dim = 0xFFFFFFE0;
  g.max_tokens = 0xFFFFFFFF;
  EXPECT_NE(error_of([&] { make_layout(g, "t"); }), "");
}

TEST(MemoryStore, HeaderBytesAtBindingOffsets) {
  ScratchDir dir;
  const std::string path = dir.file("a.episodic.mem");
  {
    EpisodicStore s = EpisodicStore::create(path, small_geometry(4), kModel, test::not_durable());
    SyntheticEpisode e(s.layout(), 1, 3);
    s.append(e.record());
  }
  const auto b = read_bytes(path);
  EXPECT_EQ(std::string(b.begin(), b.begin() + 4), "EMEM");
  EXPECT_EQ(at<uint32_t>(b, 4), 1u);
  EXPECT_EQ(at<uint32_t>(b, 8), kFileFp16);
  EXPECT_EQ(at<uint32_t>(b, 12), 3u);
  EXPECT_EQ(at<uint32_t>(b, 16), 24u);
  EXPECT_EQ(at<uint32_t>(b, 20), 32u);
  EXPECT_EQ(at<uint32_t>(b, 24), 4u);
  EXPECT_EQ(at<uint32_t>(b, 28), 0u);
  EXPECT_EQ(at<uint64_t>(b, 32), 1u);  // total_episodes
  EXPECT_EQ(at<uint64_t>(b, 40), 1u);  // write_head
  EXPECT_EQ(at<uint64_t>(b, 48), kModel);
  EXPECT_EQ(at<uint32_t>(b, 56), 5u);  // max_tokens_per_episode
  FileHeader h;
  std::memcpy(&h, b.data(), 64);
  EXPECT_EQ(at<uint32_t>(b, 60), header_crc(h));
  // Index entry 0 at 64: episode_id 0, token_count 3 at +40, summary_len at +62.
  EXPECT_EQ(at<uint64_t>(b, 64), 0u);
  EXPECT_EQ(at<uint64_t>(b, 64 + 8), kNoEpisode);
  EXPECT_EQ(at<uint32_t>(b, 64 + 40), 3u);
  EXPECT_EQ(at<float>(b, 64 + 52), 1.5f);
  const StoreLayout L = make_layout(small_geometry(4), "t");
  EXPECT_EQ(b.size(), L.file_size);
  EXPECT_EQ(at<uint32_t>(b, L.slab_offset), kSlabBlockMagic);
  EXPECT_EQ(at<uint32_t>(b, L.slab_offset + 16), 3u);
}

void expect_round_trip(SlabType type, float tol) {
  ScratchDir dir;
  const std::string path = dir.file("rt.episodic.mem");
  std::vector<SyntheticEpisode> eps;
  {
    EpisodicStore s = EpisodicStore::create(path, small_geometry(8, type), kModel, test::not_durable());
    for (uint64_t i = 0; i < 5; ++i) {
      eps.emplace_back(s.layout(), i, 1 + i % 5);
      EXPECT_EQ(s.append(eps.back().record(100 * i, i ? i - 1 : kNoEpisode)), i);
    }
  }
  StoreOptions o;
  o.model_hash = kModel;
  EpisodicStore s = EpisodicStore::open(path, o);
  EXPECT_EQ(s.total_episodes(), 5u);
  EXPECT_EQ(s.live_count(), 5u);
  for (uint64_t i = 0; i < 5; ++i) {
    const Episode e = s.read(i);
    EXPECT_EQ(e.header.episode_id, i);
    EXPECT_EQ(e.header.start_clock, 100 * i);
    EXPECT_EQ(e.header.parent_episode_id, i ? i - 1 : kNoEpisode);
    EXPECT_EQ(e.header.child_count, i < 4 ? 1u : 0u);
    EXPECT_EQ(e.tokens, eps[i].tokens);
    EXPECT_EQ(e.summary, eps[i].summary);
    ASSERT_EQ(e.kv.size(), eps[i].kv.size());
    for (size_t j = 0; j < e.kv.size(); ++j) {
      ASSERT_NEAR(e.kv[j], eps[i].kv[j], tol * (1.0f + std::abs(eps[i].kv[j]))) << j;
    }
    for (size_t j = 0; j < e.centroid.size(); ++j) {
      ASSERT_EQ(e.centroid[j], fp16_to_fp32(fp32_to_fp16(eps[i].centroid[j])));
    }
  }
  const auto bytes = read_bytes(path);
  EXPECT_TRUE(verify_store(bytes.data(), bytes.size(), path).ok());
}

TEST(MemoryStore, RoundTripFp16) {
  expect_round_trip(SlabType::f16, 1e-3f);
}
TEST(MemoryStore, RoundTripQ8_0) {
  expect_round_trip(SlabType::q8_0, 0.04f);
}

TEST(MemoryStore, CircularOverwriteSkipsPinned) {
  ScratchDir dir;
  EpisodicStore s = EpisodicStore::create(dir.file("c.mem"), small_geometry(4), kModel, test::not_durable());
  SyntheticEpisode e(s.layout(), 7, 2);
  for (int i = 0; i < 4; ++i) s.append(e.record());
  s.set_pinned(1, true);
  s.set_pinned(2, true);
  EXPECT_EQ(s.append(e.record()), 4u);  // slot 0: evicts episode 0
  EXPECT_FALSE(s.find(0));
  EXPECT_EQ(s.header().write_head, 1u);
  EXPECT_EQ(s.append(e.record()), 5u);  // slots 1, 2 pinned: lands in slot 3, evicts 3
  EXPECT_FALSE(s.find(3));
  EXPECT_TRUE(s.find(1) && s.find(2));
  EXPECT_EQ(s.read(5).slot, 3u);
  EXPECT_EQ(s.header().write_head, 0u);
  EXPECT_TRUE(s.find(1)->flags & kEpisodePinned);
  s.set_pinned(4, true);
  s.set_pinned(5, true);
  EXPECT_NE(error_of([&] { s.append(e.record()); }).find("pinned"), std::string::npos);
  s.set_pinned(2, false);
  EXPECT_EQ(s.append(e.record()), 6u);
  EXPECT_FALSE(s.find(2));
  EXPECT_EQ(s.live_count(), 4u);
  // Pinning is not checksummed: the records still verify.
  for (const EpisodeHeader& h : s.list()) EXPECT_NO_THROW(s.read(h.episode_id));
}

TEST(MemoryStore, AccessCountsAndLineagePersist) {
  ScratchDir dir;
  const std::string path = dir.file("a.mem");
  {
    EpisodicStore s = EpisodicStore::create(path, small_geometry(4), kModel, test::not_durable());
    SyntheticEpisode e(s.layout(), 3, 4);
    s.append(e.record());
    s.append(e.record(0, 0));
    s.append(e.record(0, 0));
    s.record_access(1, 111);
    s.record_access(1, 222);
    s.sync();
  }
  EpisodicStore s = EpisodicStore::open(path);
  EXPECT_EQ(s.find(0)->child_count, 2u);
  EXPECT_EQ(s.find(1)->access_count, 2u);
  EXPECT_EQ(s.find(1)->last_accessed, 222u);
  EXPECT_EQ(s.find(2)->access_count, 0u);
  EXPECT_NO_THROW(s.read(1));
  EXPECT_NE(error_of([&] { s.read(9); }).find("episode 9 is not in the store"), std::string::npos);
}

TEST(MemoryStore, RejectsBadRecords) {
  ScratchDir dir;
  EpisodicStore s = EpisodicStore::create(dir.file("r.mem"), small_geometry(4), kModel, test::not_durable());
  SyntheticEpisode e(s.layout(), 3, 4), big(s.layout(), 3, 6);
  EpisodeRecord r = e.record();
  r.centroid = r.centroid.subspan(1);
  EXPECT_NE(error_of([&] { s.append(r); }).find("centroid"), std::string::npos);
  EXPECT_NE(error_of([&] { s.append(big.record()); }).find("6 tokens"), std::string::npos);
  r = e.record();
  r.parent_episode_id = 0;
  EXPECT_NE(error_of([&] { s.append(r); }).find("parent"), std::string::npos);
  r = e.record();
  r.salience_norm = NAN;
  EXPECT_NE(error_of([&] { s.append(r); }).find("salience"), std::string::npos);
  EXPECT_EQ(s.total_episodes(), 0u);
}

TEST(MemoryStore, SummaryIsCutAtACharacterBoundary) {
  EXPECT_EQ(utf8_prefix("abc", 5), "abc");
  EXPECT_EQ(utf8_prefix("ab\xC3\xA9", 3), "ab");
  EXPECT_EQ(utf8_prefix("ab\xE2\x82\xAC"
                        "d",
                        4),
            "ab");
  ScratchDir dir;
  EpisodicStore s = EpisodicStore::create(dir.file("s.mem"), small_geometry(2), kModel, test::not_durable());
  SyntheticEpisode e(s.layout(), 1, 1);
  std::string long_text(255, 'x');
  long_text += "\xE2\x82\xAC";  // a 3-byte character straddling byte 256
  EpisodeRecord r = e.record();
  r.summary = long_text;
  s.append(r);
  EXPECT_EQ(s.read(0).summary, std::string(255, 'x'));
}

TEST(MemoryStore, CreateNeverReplacesAFile) {
  ScratchDir dir;
  const std::string path = dir.file("x.mem");
  write_bytes(path, {1, 2, 3});
  EXPECT_NE(error_of([&] {
              EpisodicStore::create(path, small_geometry(), kModel, test::not_durable());
            }).find("already exists"),
            std::string::npos);
  EXPECT_EQ(read_bytes(path), (std::vector<uint8_t>{1, 2, 3}));
}

TEST(MemoryStore, SecondWriterIsRefused) {
  ScratchDir dir;
  const std::string path = dir.file("w.mem");
  EpisodicStore s = EpisodicStore::create(path, small_geometry(), kModel, test::not_durable());
  EXPECT_NE(error_of([&] { EpisodicStore::open(path); }).find("another process"),
            std::string::npos);
  StoreOptions ro;
  ro.read_only = true;
  EXPECT_NO_THROW(EpisodicStore::open(path, ro));
}

// Every way a file can be wrong gives one clear error and leaves the bytes as they were.
TEST(MemoryStore, BadFilesAreRefusedAndLeftUntouched) {
  ScratchDir dir;
  const std::string good = dir.file("good.mem");
  {
    EpisodicStore s = EpisodicStore::create(good, small_geometry(4), kModel, test::not_durable());
    SyntheticEpisode e(s.layout(), 1, 3);
    s.append(e.record());
    s.append(e.record());
  }
  const auto bytes = read_bytes(good);
  const StoreLayout L = make_layout(small_geometry(4), "t");
  struct Case {
    const char* name;
    std::function<void(std::vector<uint8_t>&)> damage;
    const char* expect;
  };
  auto put32 = [](std::vector<uint8_t>& b, size_t off, uint32_t v) { std::memcpy(&b[off], &v, 4); };
  auto put64 = [](std::vector<uint8_t>& b, size_t off, uint64_t v) { std::memcpy(&b[off], &v, 8); };
  auto fix_crc = [](std::vector<uint8_t>& b) {
    FileHeader h;
    std::memcpy(&h, b.data(), 64);
    h.header_crc = header_crc(h);
    std::memcpy(b.data(), &h, 64);
  };
  const Case cases[] = {
      {"empty", [](auto& b) { b.clear(); }, "truncated"},
      {"short", [](auto& b) { b.resize(40); }, "truncated"},
      {"garbage",
       [](auto& b) {
         for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(i * 7 + 3);
       },
       "bad magic"},
      {"truncated body", [](auto& b) { b.resize(b.size() - 1); }, "truncated"},
      {"trailing bytes", [](auto& b) { b.push_back(0); }, "needs exactly"},
      {"version 2",
       [&](auto& b) {
         put32(b, 4, 2);
         fix_crc(b);
       },
       "version 2"},
      {"compressed",
       [&](auto& b) {
         put32(b, 8, kFileFp16 | kFileCompressed);
         fix_crc(b);
       },
       "compressed"},
      {"both slab types",
       [&](auto& b) {
         put32(b, 8, kFileFp16 | kFileQ8_0);
         fix_crc(b);
       },
       "exactly one"},
      {"zero layers",
       [&](auto& b) {
         put32(b, 12, 0);
         fix_crc(b);
       },
       "num_layers is 0"},
      {"padding",
       [&](auto& b) {
         put32(b, 28, 5);
         fix_crc(b);
       },
       "padding"},
      {"header bit flip", [](auto& b) { b[16] ^= 0x10; }, "header checksum"},
      {"write_head", [&](auto& b) { put64(b, 40, 4); }, "write_head"},
      {"token_count", [&](auto& b) { put32(b, 64 + 40, 99); }, "token_count 99"},
      {"summary_len",
       [&](auto& b) {
         b[64 + 62] = 0xFF;
         b[64 + 63] = 0xFF;
       },
       "summary_len"},
      {"flags", [&](auto& b) { b[64 + 60] = 0x80; }, "unknown flags"},
      {"stray unpublished id",
       [&](auto& b) {
         put64(b, 64 + L.entry_bytes * 3, 7);
         put32(b, 64 + L.entry_bytes * 3 + 40, 1);
       },
       "not below total_episodes"},
      {"duplicate id", [&](auto& b) { put64(b, 64 + L.entry_bytes, 0); }, "also in slot"},
  };
  for (const Case& c : cases) {
    const std::string path = dir.file(std::string(c.name) + ".mem");
    auto b = bytes;
    c.damage(b);
    write_bytes(path, b);
    const std::string err = error_of([&] { EpisodicStore::open(path); });
    EXPECT_NE(err.find(c.expect), std::string::npos) << c.name << ": " << err;
    EXPECT_NE(err.find(path), std::string::npos) << c.name << ": " << err;
    EXPECT_EQ(err.find('\n'), std::string::npos);
    EXPECT_EQ(read_bytes(path), b) << c.name << ": the file was modified";
    // verify reports the same file as inconsistent.
    EXPECT_FALSE(verify_store(b.data(), b.size(), path).ok()) << c.name;
  }
  // Another model.
  StoreOptions other;
  other.model_hash = kModel + 1;
  EXPECT_NE(error_of([&] { EpisodicStore::open(good, other); }).find("another model"),
            std::string::npos);
  EXPECT_EQ(read_bytes(good), bytes);
}

// A verified recall of a record read with preadv (cold) checks what it read: the block header
// before the K/V and the checksum over the summary and tokens as well as the K/V.
TEST(MemoryStore, ColdVerifiedRecallChecksTheWholeRecord) {
  ScratchDir dir;
  const std::string path = dir.file("c.mem");
  {
    EpisodicStore s = EpisodicStore::create(path, small_geometry(4), kModel, test::not_durable());
    for (int i = 0; i < 3; ++i) s.append(SyntheticEpisode(s.layout(), i, 3).record());
  }
  auto b = read_bytes(path);
  const StoreLayout L = make_layout(small_geometry(4), "t");
  b[L.block_offset(0) + L.block_summary + 1] ^= 1;  // the summary area of episode 0
  b[L.block_offset(1)] ^= 1;                        // the block magic of episode 1
  write_bytes(path, b);
  EpisodicStore s = EpisodicStore::open(path);
  const RotaryDims rope = RotaryDims::make(RopeStyle::neox, 2, 16, 16, 10000.0);
  std::vector<uint16_t> rk(3 * 3 * 32), rv(rk.size());
  std::vector<uint16_t*> kp = {rk.data(), rk.data() + 96, rk.data() + 192};
  std::vector<uint16_t*> vp = {rv.data(), rv.data() + 96, rv.data() + 192};
  RehydrateOptions ro;
  ro.always_pread = true;
  const KvRowsF16 rows{kp, vp, 32, 3};
  EXPECT_NE(error_of([&] {
              s.rehydrate(0, {&rope, 1}, 1.0, rows, ro);
            }).find("checksum mismatch"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              s.rehydrate(1, {&rope, 1}, 1.0, rows, ro);
            }).find("bad block magic"),
            std::string::npos);
  EXPECT_NO_THROW(s.rehydrate(2, {&rope, 1}, 1.0, rows, ro));
  ro.verify = false;  // unverified, the damage outside the K/V goes unseen
  EXPECT_NO_THROW(s.rehydrate(0, {&rope, 1}, 1.0, rows, ro));
}

TEST(MemoryStore, VerifyFindsEveryDamagedRecord) {
  ScratchDir dir;
  const std::string path = dir.file("v.mem");
  {
    EpisodicStore s = EpisodicStore::create(path, small_geometry(4), kModel, test::not_durable());
    for (int i = 0; i < 4; ++i) s.append(SyntheticEpisode(s.layout(), i, 3).record());
  }
  auto b = read_bytes(path);
  const StoreLayout L = make_layout(small_geometry(4), "t");
  ASSERT_TRUE(verify_store(b.data(), b.size(), path).ok());
  b[L.block_offset(1) + L.block_kv + 5] ^= 1;                        // a K value of episode 1
  b[L.entry_offset(3) + 64 + 3] ^= 1;                                // the centroid of episode 3
  b[L.entry_offset(2) + offsetof(EpisodeHeader, start_clock)] ^= 1;  // a checksummed field
  write_bytes(path, b);
  const VerifyReport r = verify_store(b.data(), b.size(), path);
  ASSERT_EQ(r.problems.size(), 3u);
  EXPECT_NE(r.problems[0].find("episode 1"), std::string::npos);
  EXPECT_NE(r.problems[0].find("checksum mismatch"), std::string::npos);
  EXPECT_NE(r.problems[1].find("episode 2"), std::string::npos);
  EXPECT_NE(r.problems[2].find("episode 3"), std::string::npos);
  // Open succeeds (structure is fine), reading a damaged episode throws, others read.
  EpisodicStore s = EpisodicStore::open(path);
  EXPECT_NE(error_of([&] { s.read(1); }).find("checksum mismatch"), std::string::npos);
  EXPECT_NO_THROW(s.read(0));
  std::vector<float> k(3 * 3 * 32), v(k.size());
  const RotaryDims rope = RotaryDims::make(RopeStyle::neox, 2, 16, 16, 10000.0);
  EXPECT_NE(error_of([&] { s.rehydrate(1, {&rope, 1}, 0.0, k.data(), v.data()); }), "");
  // Into f16 rows, verified, through the mapping and with preadv (the path of a cold record,
  // which checks the checksum over the bytes it read): every damaged record is refused.
  std::vector<uint16_t> rk(3 * 3 * 32), rv(rk.size());
  std::vector<uint16_t*> kp = {rk.data(), rk.data() + 96, rk.data() + 192};
  std::vector<uint16_t*> vp = {rv.data(), rv.data() + 96, rv.data() + 192};
  // Through the mapping also as a device asks (Δ = 0: the rows copied as stored) with the
  // planes checked apart on a pool's threads and joined.
  ThreadPool pool(3);
  for (int mode = 0; mode < 3; ++mode) {
    const bool pread = mode == 1;
    const double delta = mode == 2 ? 0.0 : 5.0;
    RehydrateOptions ro;
    ro.always_pread = pread;
    if (mode == 2) ro.pool = &pool;
    const KvRowsF16 rows{kp, vp, 32, 3};
    EXPECT_NO_THROW(s.rehydrate(0, {&rope, 1}, delta, rows, ro)) << "mode " << mode;
    for (uint64_t bad : {1u, 2u, 3u})
      EXPECT_NE(error_of([&] {
                  s.rehydrate(bad, {&rope, 1}, delta, rows, ro);
                }).find("checksum mismatch"),
                std::string::npos)
          << "episode " << bad << " mode " << mode;
  }
  // As stored, for a device (with_stored_kv): the planes in place, and their CRC-32C checks
  // the whole record.
  const KvRowsF16 rows{kp, vp, 32, 3};
  ASSERT_NO_THROW(s.rehydrate(0, {&rope, 1}, 0.0, rows));
  for (uint64_t id : {0u, 1u, 2u, 3u}) {
    bool called = false;
    const std::string err = error_of([&] {
      EXPECT_TRUE(s.with_stored_kv(id, [&](const StoredKvF16& src) {
        called = true;
        ASSERT_EQ(src.n_tokens, 3u);
        ASSERT_EQ(src.n_planes, 6u);
        ASSERT_EQ(src.row_dim, 32u);
        if (id == 0)
          for (size_t l = 0; l < 3; ++l) {
            EXPECT_EQ(std::memcmp(src.planes + 2 * l * 96, kp[l], 96 * 2), 0) << "K " << l;
            EXPECT_EQ(std::memcmp(src.planes + (2 * l + 1) * 96, vp[l], 96 * 2), 0) << "V " << l;
          }
        std::vector<uint32_t> crc(src.n_planes);
        for (size_t p = 0; p < crc.size(); ++p)
          crc[p] = crc32c(0, src.planes + p * src.plane_values(), src.plane_values() * 2);
        if (id % 2 == 1) src.prepare();  // the head read ahead, as a device does
        src.verify(crc);
      }));
    });
    EXPECT_TRUE(called);
    if (id == 0)
      EXPECT_EQ(err, "");
    else
      EXPECT_NE(err.find("checksum mismatch"), std::string::npos) << "episode " << id;
  }
  // Mutable fields (access, children, pin) are outside the checksum.
  b = read_bytes(path);
  b[L.entry_offset(0) + offsetof(EpisodeHeader, access_count)] = 9;
  EXPECT_EQ(verify_store(b.data(), b.size(), path).problems.size(), 3u);
}

TEST(MemoryStore, QueryMatchesBruteForce) {
  ScratchDir dir;
  StoreGeometry g = small_geometry(64);
  g.hidden_size = 67;  // an awkward size for the SIMD scan
  EpisodicStore s = EpisodicStore::create(dir.file("q.mem"), g, kModel, test::not_durable());
  std::vector<std::vector<float>> cents;
  for (int i = 0; i < 80; ++i) {  // wraps: ids 16..79 live
    SyntheticEpisode e(s.layout(), i, 1);
    cents.push_back(e.centroid);
    s.append(e.record());
  }
  s.set_pinned(20, true);
  std::mt19937 rng(9);
  std::normal_distribution<float> nd;
  std::vector<float> q(67);
  for (auto& x : q) x = nd(rng);
  ThreadPool pool(3);
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
    const auto hits = s.query(q, 5, p);
    ASSERT_EQ(hits.size(), 5u);
    // Brute force in double over the f16-rounded centroids.
    std::vector<std::pair<double, uint64_t>> ref;
    for (uint64_t id = 16; id < 80; ++id) {
      double dot = 0, n2 = 0, q2 = 0;
      for (size_t i = 0; i < 67; ++i) {
        const double c = fp16_to_fp32(fp32_to_fp16(cents[id][i]));
        dot += c * q[i];
        n2 += c * c;
        q2 += static_cast<double>(q[i]) * q[i];
      }
      ref.push_back({dot / std::sqrt(n2 * q2), id});
    }
    std::sort(ref.begin(), ref.end(), [](auto& a, auto& b) { return a.first > b.first; });
    for (size_t i = 0; i < 5; ++i) {
      EXPECT_EQ(hits[i].episode_id, ref[i].second);
      EXPECT_NEAR(hits[i].score, ref[i].first, 1e-5);
    }
  }
  // The centroid of an episode finds itself first.
  EXPECT_EQ(s.query(cents[42], 1)[0].episode_id, 42u);
  EXPECT_EQ(s.query(q, 1000).size(), 64u);
}

// An append interrupted before its publish leaves a pending entry at write_head that is
// invisible, verifies as a note, and is replaced by the next append.
TEST(MemoryStore, PendingAppendIsInvisible) {
  ScratchDir dir;
  const std::string path = dir.file("p.mem");
  const StoreLayout L = make_layout(small_geometry(4), "t");
  {
    EpisodicStore s = EpisodicStore::create(path, small_geometry(4), kModel, test::not_durable());
    s.append(SyntheticEpisode(L, 0, 2).record());
    s.append(SyntheticEpisode(L, 1, 2).record());
  }
  auto b = read_bytes(path);
  // Simulate the crash: copy entry and block of slot 1 to slot 2 as episode 2, unpublished.
  std::memcpy(&b[L.entry_offset(2)], &b[L.entry_offset(1)], L.entry_bytes);
  const uint64_t two = 2;
  std::memcpy(&b[L.entry_offset(2)], &two, 8);
  write_bytes(path, b);
  const VerifyReport r = verify_store(b.data(), b.size(), path);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.notes.size(), 1u);
  EpisodicStore s = EpisodicStore::open(path);
  EXPECT_EQ(s.live_count(), 2u);
  EXPECT_FALSE(s.find(2));
  SyntheticEpisode e(L, 5, 4);
  EXPECT_EQ(s.append(e.record()), 2u);
  EXPECT_EQ(s.read(2).tokens, e.tokens);
}

}  // namespace
}  // namespace channel

namespace channel {
namespace {

// The fuzz seeds (tests/fuzz/corpus/memory_fuzz) are written by the disabled test below
// (run it with --gtest_also_run_disabled_tests --gtest_filter='*WriteFuzzSeeds'); this checks
// that each valid_* seed still opens and verifies, and each invalid_* one is refused.
const std::string kSeedDir = std::string(CHANNEL_SOURCE_DIR) + "/tests/fuzz/corpus/memory_fuzz";

TEST(MemoryStore, FuzzSeedsAreWhatTheyClaim) {
  int n = 0;
  for (const auto& f : std::filesystem::directory_iterator(kSeedDir)) {
    const std::string name = f.path().filename().string();
    const auto b = read_bytes(f.path().string());
    EXPECT_LT(b.size(), 65536u) << name;
    const VerifyReport r = verify_store(b.data(), b.size(), name);
    if (name.rfind("valid_", 0) == 0) {
      EXPECT_TRUE(r.ok()) << name << ": " << (r.ok() ? "" : r.problems[0]);
      StoreOptions o;
      o.read_only = true;
      EXPECT_NO_THROW(EpisodicStore::open(f.path().string(), o)) << name;
    } else {
      EXPECT_FALSE(r.ok()) << name;
    }
    ++n;
  }
  EXPECT_GE(n, 8);
}

TEST(MemoryStore, DISABLED_WriteFuzzSeeds) {
  ScratchDir dir;
  auto geometry = [](SlabType t, uint32_t cap) {
    StoreGeometry g;
    g.num_layers = 2;
    g.hidden_size = 16;
    g.kv_dim = 32;
    g.max_episodes = cap;
    g.max_tokens = 4;
    g.slab_type = t;
    return g;
  };
  auto make = [&](const std::string& name, SlabType t, uint32_t cap, int n_eps) {
    const std::string path = dir.file(name);
    {
      EpisodicStore s = EpisodicStore::create(path, geometry(t, cap), 0xC4A77E1ull, test::not_durable());
      for (int i = 0; i < n_eps; ++i) {
        SyntheticEpisode e(s.layout(), static_cast<uint64_t>(i), 1 + i % 4);
        EpisodeRecord r =
            e.record(static_cast<uint64_t>(i) * 4, i ? static_cast<uint64_t>(i - 1) : kNoEpisode);
        r.flags = static_cast<uint16_t>(i % 3 == 1 ? kEpisodeHasTool : 0);
        r.continuation_token = static_cast<uint32_t>(i + 7);
        s.append(r);
      }
      if (n_eps > 1) {
        s.set_pinned(static_cast<uint64_t>(n_eps - 1), true);
        s.record_access(static_cast<uint64_t>(n_eps - 2), 1700000000123ull);
      }
    }
    return read_bytes(path);
  };
  std::filesystem::create_directories(kSeedDir);
  auto out = [&](const std::string& name, const std::vector<uint8_t>& b) {
    write_bytes(kSeedDir + "/" + name, b);
  };
  const auto fp16 = make("a", SlabType::f16, 4, 3);
  out("valid_fp16.mem", fp16);
  out("valid_q8_0.mem", make("b", SlabType::q8_0, 4, 2));
  out("valid_wrapped.mem", make("c", SlabType::f16, 3, 7));
  out("valid_empty.mem", make("d", SlabType::f16, 2, 0));
  auto b = fp16;
  b.resize(b.size() / 2);
  out("invalid_truncated.mem", b);
  b = fp16;
  b[0] = 'X';
  out("invalid_magic.mem", b);
  b = fp16;
  const StoreLayout L = make_layout(geometry(SlabType::f16, 4), "t");
  b[L.block_offset(1) + L.block_kv + 3] ^= 0x40;
  out("invalid_checksum.mem", b);
  b = fp16;
  b[L.entry_offset(0) + 40] = 200;
  out("invalid_token_count.mem", b);
  // Version 3: retrieval and lexical sections; one damaged lexical entry, one damaged header.
  StoreGeometry g3 = geometry(SlabType::f16, 3);
  g3.ext_kinds = kRetrievalKeys;
  g3.head_dim = 16;
  g3.keys_per_head = 1;
  g3.lexical = true;
  const std::string p3 = dir.file("v3");
  {
    EpisodicStore s = EpisodicStore::create(p3, g3, 0xC4A77E1ull, test::not_durable());
    for (uint64_t i = 0; i < 2; ++i)
      s.append(SyntheticEpisode(s.layout(), i, 2 + i).record(i * 4, i ? i - 1 : kNoEpisode));
  }
  const auto v3 = read_bytes(p3);
  const StoreLayout L3 = make_layout(g3, "t");
  out("valid_v3.mem", v3);
  b = v3;
  b[L3.lex_entry_offset(1) + 16] ^= 0x01;
  out("invalid_v3_lexical_entry.mem", b);
  b = v3;
  b[L3.lex_offset + 4] ^= 0x02;
  out("invalid_v3_lexical_section.mem", b);
}

}  // namespace
}  // namespace channel
