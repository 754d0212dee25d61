// Recall in attention space (docs/memory-format.md, "Retrieval section"): the kernels against their
// scalar references; the version 2 store (layout, round trip, damaged entries skipped, version 1
// files still read); and recall@k through a live session: episodes planted by consolidation
// are found again by keys and by a retrieval head for cues made from the same content. The
// micro model is random, with its global layer's key projection equal to the query projection
// of one head per group and a retrieval head whose key matrix is its query matrix, so that the
// same content scores high by construction (a random model has no trained notion of it).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "memory/auto_recall.h"
#include "memory/episodic_view.h"
#include "memory/lexical_index.h"
#include "memory/memory_attachment.h"
#include "gguf/model_signature.h"
#include "memory/retrieval_kernels.h"
#include "memory_test_util.h"
#include "model/model.h"
#include "model/random_model.h"
#include "ops/fp16.h"
#include "runtime/stream_session.h"
#include "support/micro_model.h"
#include "util/error.h"

namespace channel {
namespace {

using test::ScratchDir;

std::vector<uint16_t> random_f16(std::mt19937& rng, size_t n) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = fp32_to_fp16(d(rng));
  return v;
}
std::vector<float> random_f32(std::mt19937& rng, size_t n) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

TEST(RetrievalKernels, KeyMatchMatchesReference) {
  std::mt19937 rng(1);
  for (size_t dim : {1, 3, 7, 15, 16, 17, 31, 33, 64, 65, 130, 256}) {
    for (size_t group : {1, 2, 3}) {
      for (size_t R : {1, 2, 8, 9}) {
        const size_t blocks = 1 + rng() % 4;
        const auto q = random_f32(rng, blocks * group * dim + 1);  // +1: misaligned start
        const auto k = random_f16(rng, blocks * R * dim + 1);
        const float ref = key_match_score_ref(q.data() + 1, k.data() + 1, blocks, group, R, dim);
        const float got = key_match_score(q.data() + 1, k.data() + 1, blocks, group, R, dim);
        EXPECT_NEAR(got, ref, 1e-4f * (1.0f + std::fabs(ref)) * std::sqrt(float(dim)))
            << "dim " << dim << " group " << group << " R " << R << " " << retrieval_kernels_isa();
      }
    }
  }
}

TEST(RetrievalKernels, ProjMaxMatchesReference) {
  std::mt19937 rng(2);
  for (size_t dim : {1, 3, 7, 15, 16, 17, 31, 33, 64, 65, 130}) {
    for (size_t n : {1, 2, 5, 17, 64}) {
      const auto c = random_f32(rng, dim + 1);
      const auto e = random_f16(rng, n * dim + 1);
      const float ref = proj_max_score_ref(c.data() + 1, e.data() + 1, n, dim);
      const float got = proj_max_score(c.data() + 1, e.data() + 1, n, dim);
      EXPECT_NEAR(got, ref, 1e-4f * (1.0f + std::fabs(ref)) * std::sqrt(float(dim)))
          << "dim " << dim << " n " << n;
    }
  }
}

// --- the version 2 store ---------------------------------------------------------------

StoreGeometry v2_geometry(uint32_t kinds) {
  StoreGeometry g;
  g.num_layers = 2;
  g.hidden_size = 24;
  g.kv_dim = 16;
  g.max_episodes = 32;
  g.max_tokens = 8;
  g.ext_kinds = kinds;
  g.head_dim = 8;  // 2 KV heads
  g.keys_per_head = 3;
  g.proj_dim = 5;
  return g;
}

struct Planted {
  std::vector<int32_t> tokens;
  std::vector<float> centroid, kv, keys, proj;
};

Planted planted(const StoreLayout& L, uint32_t seed, size_t n) {
  std::mt19937 rng(seed);
  Planted p;
  p.tokens.assign(n, static_cast<int32_t>(seed));
  p.centroid = random_f32(rng, L.hidden_size);
  p.kv = random_f32(rng, 2ull * L.num_layers * n * L.kv_dim);
  p.keys = random_f32(rng, L.has_keys() ? L.keys_values() : 0);
  p.proj = random_f32(rng, L.has_proj() ? n * L.proj_dim : 0);
  for (size_t t = 0; t < (L.has_proj() ? n : 0); ++t) {  // unit vectors, as the head makes
    float* v = p.proj.data() + t * L.proj_dim;
    double s = 0;
    for (size_t i = 0; i < L.proj_dim; ++i) s += double{v[i]} * v[i];
    for (size_t i = 0; i < L.proj_dim; ++i) v[i] = static_cast<float>(v[i] / std::sqrt(s));
  }
  return p;
}

uint64_t append(EpisodicStore& s, const Planted& p) {
  EpisodeRecord r;
  r.tokens = p.tokens;
  r.centroid = p.centroid;
  r.kv = p.kv;
  r.rep_keys = p.keys;
  r.proj = p.proj;
  return s.append(r);
}

// A version 2 store at `path` with projected vectors and six planted 4-token episodes (seeds
// seed..seed+5, kept in `ps`), closed again; returns their ids.
std::vector<uint64_t> six_planted(const std::string& path, uint32_t seed, StoreLayout& L,
                                  std::vector<Planted>& ps) {
  EpisodicStore s = EpisodicStore::create(path, v2_geometry(kRetrievalProj), 7,
                                          test::not_durable());
  L = s.layout();
  std::vector<uint64_t> ids;
  for (uint32_t i = 0; i < 6; ++i) {
    ps.push_back(planted(L, seed + i, 4));
    ids.push_back(append(s, ps.back()));
  }
  return ids;
}

TEST(RetrievalStore, LayoutAndRoundTrip) {
  ScratchDir dir;
  StoreOptions o = test::not_durable();
  const std::string path = dir.file("v2.mem");
  EpisodicStore s = EpisodicStore::create(path, v2_geometry(kRetrievalKeys | kRetrievalProj), 7, o);
  const StoreLayout& L = s.layout();
  EXPECT_EQ(L.version, 2u);
  EXPECT_EQ(s.header().version, 2u);
  EXPECT_EQ(L.ext_offset % 64, 0u);
  EXPECT_EQ(L.ext_entry_bytes % 64, 0u);
  EXPECT_EQ(L.ext_keys, 64u);
  EXPECT_EQ(L.keys_values(), 2u * 2 * 3 * 8);
  EXPECT_EQ(L.ext_proj, round_up64(64 + 2 * L.keys_values()));
  EXPECT_EQ(L.file_size, L.ext_offset + 64 + 32 * L.ext_entry_bytes);
  std::vector<Planted> ps;
  for (uint32_t i = 0; i < 10; ++i) {
    ps.push_back(planted(L, 100 + i, 1 + i % 8));
    EXPECT_EQ(append(s, ps.back()), i);
  }
  StoreOptions ro;
  ro.read_only = true;
  EpisodicStore back = EpisodicStore::open(path, ro);
  EXPECT_EQ(back.live_count(), 10u);
  EXPECT_EQ(back.layout().ext_entry_bytes, L.ext_entry_bytes);

  // A cue equal to episode 4's first projected vector finds it first (score 1 up to f16).
  RetrievalCue cue;
  cue.method = RecallMethod::proj;
  cue.proj = std::span<const float>(ps[4].proj.data(), L.proj_dim);
  auto hits = back.query_retrieval(cue, 3);
  ASSERT_EQ(hits.size(), 3u);
  EXPECT_EQ(hits[0].episode_id, 4u);
  EXPECT_NEAR(hits[0].score, 1.0f, 2e-3f);
  // Keys: the cue's queries equal episode 6's first key of every head (group 1).
  std::vector<float> q(2 * 2 * 8);
  for (size_t b = 0; b < 4; ++b)
    std::copy_n(ps[6].keys.data() + b * 3 * 8, 8, q.data() + b * 8);
  cue = {};
  cue.method = RecallMethod::keys;
  cue.queries = q;
  cue.group = 1;
  cue.scale = 0.5f;
  hits = back.query_retrieval(cue, 1);
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits[0].episode_id, 6u);
  // Hybrid runs and ranks every live episode it is asked for.
  cue.method = RecallMethod::hybrid;
  cue.centroid = ps[6].centroid;
  hits = back.query_retrieval(cue, 20);
  EXPECT_EQ(hits.size(), 10u);
  EXPECT_EQ(hits[0].episode_id, 6u);
}

TEST(LexicalIndex, RareSharedTokensWeighMostCommonOnesNothing) {
  LexicalIndex ix;
  // token 1 ("the") is in every episode; 50 and 51 (a name) only in slot 2; 60 in two.
  ix.set(0, 10, std::vector<int32_t>{1, 2, 3, 60});
  ix.set(1, 11, std::vector<int32_t>{1, 4, 5, 60, 1, 1});
  ix.set(2, 12, std::vector<int32_t>{1, 50, 51, 7});
  ix.set(3, 13, std::vector<int32_t>{1, 8, 9});
  EXPECT_EQ(ix.episodes(), 4u);
  const std::vector<uint32_t> slots{0, 1, 2, 3};
  const std::vector<int32_t> cue{1, 50, 51, 99, 1};
  std::vector<float> sc = ix.score(cue, slots);
  ASSERT_EQ(sc.size(), 4u);
  EXPECT_GT(sc[2], 0.5f);          // the name's two rare tokens
  EXPECT_LT(sc[0], 0.1f * sc[2]);  // only the ubiquitous token
  EXPECT_FLOAT_EQ(sc[0], sc[3]);
  EXPECT_LE(sc[2], 1.0f);
  EXPECT_TRUE(ix.current(2, 12));
  EXPECT_FALSE(ix.current(2, 99));
  // Replacing and clearing keep the document frequencies exact.
  ix.set(2, 99, std::vector<int32_t>{8});
  ix.clear(3);
  EXPECT_EQ(ix.episodes(), 3u);
  sc = ix.score(cue, slots);
  EXPECT_EQ(sc[2], 0.0f);
  EXPECT_EQ(sc[3], 0.0f);
  EXPECT_TRUE(ix.score({}, slots) == std::vector<float>(4, 0.0f));
}

TEST(RetrievalStore, LexicalHalfFindsTheEpisodeThatNamesTheCue) {
  ScratchDir dir;
  StoreOptions o = test::not_durable();
  EpisodicStore s =
      EpisodicStore::create(dir.file("lex.mem"), v2_geometry(kRetrievalProj), 7, o);
  const StoreLayout& L = s.layout();
  std::vector<Planted> ps;
  for (uint32_t i = 0; i < 12; ++i) {
    ps.push_back(planted(L, 300 + i, 6));
    for (size_t t = 0; t < 6; ++t) ps.back().tokens[t] = static_cast<int32_t>(1 + t % 2);
    if (i == 9) ps.back().tokens[3] = 777;  // the rare token only episode 9 holds
    append(s, ps.back());
  }
  // The dense cue points at episode 4; the cue's tokens name episode 9.
  RetrievalCue cue;
  cue.method = RecallMethod::proj;
  cue.proj = std::span<const float>(ps[4].proj.data(), L.proj_dim);
  const std::vector<int32_t> words{1, 2, 777};
  cue.tokens = words;
  EXPECT_EQ(s.query_retrieval(cue, 1).at(0).episode_id, 4u);  // lexical weight 0: dense only
  cue.lexical = 1000.0f;
  EXPECT_EQ(s.query_retrieval(cue, 1).at(0).episode_id, 9u);
  cue.lexical = 0.01f;  // a small weight only breaks ties
  EXPECT_EQ(s.query_retrieval(cue, 1).at(0).episode_id, 4u);
  // A removed episode leaves the index on the next query.
  s.remove(9);
  cue.lexical = 1000.0f;
  EXPECT_NE(s.query_retrieval(cue, 1).at(0).episode_id, 9u);
}

TEST(RetrievalStore, DamagedEntryIsSkippedAndVerifyReportsIt) {
  ScratchDir dir;
  StoreOptions o = test::not_durable();
  const std::string path = dir.file("v2.mem");
  StoreLayout L;
  std::vector<Planted> ps;
  six_planted(path, 200, L, ps);
  uint32_t slot3 = 0;
  {
    EpisodicStore s = EpisodicStore::open(path, o);
    slot3 = static_cast<uint32_t>(s.find(3) ? 3 : 0);
  }
  {  // flip one byte of episode 3's projected vectors
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(L.ext_entry_offset(slot3) + L.ext_proj + 1));
    char c = 0;
    f.read(&c, 1);
    c ^= 0x40;
    f.seekp(static_cast<std::streamoff>(L.ext_entry_offset(slot3) + L.ext_proj + 1));
    f.write(&c, 1);
  }
  StoreOptions ro;
  ro.read_only = true;
  EpisodicStore s = EpisodicStore::open(path, ro);  // open does not read the section
  RetrievalCue cue;
  cue.method = RecallMethod::proj;
  cue.proj = std::span<const float>(ps[3].proj.data(), L.proj_dim);
  testing::internal::CaptureStderr();
  const auto hits = s.query_retrieval(cue, 10);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("retrieval entry of episode 3"), std::string::npos) << err;
  ASSERT_EQ(hits.size(), 5u);
  for (const RecallHit& h : hits) EXPECT_NE(h.episode_id, 3u);
  EXPECT_EQ(s.damaged_retrieval_entries(), 1u);
  testing::internal::CaptureStderr();
  (void)s.query_retrieval(cue, 10);  // reported once
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  // verify finds it; the rest of the record still reads.
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const VerifyReport r = verify_store(bytes.data(), bytes.size(), "v2.mem");
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_NE(r.problems[0].find("checksum mismatch"), std::string::npos) << r.problems[0];
  EXPECT_EQ(s.read(3).tokens.size(), 4u);
}

// Checksums are verified when an entry ranks, not for every entry a query scores: a damaged
// entry far from the cue costs nothing and is not reported, and one that ranks first (with an
// absurd score) is reported, dropped, and the next best takes its place.
TEST(RetrievalStore, ADamagedEntryIsCheckedWhenItRanksAndTheNextTakesItsPlace) {
  ScratchDir dir;
  StoreOptions o = test::not_durable();
  const std::string path = dir.file("v2.mem");
  StoreLayout L;
  std::vector<Planted> ps;
  const std::vector<uint64_t> ids = six_planted(path, 300, L, ps);
  uint32_t slot2 = 0;
  {
    EpisodicStore s = EpisodicStore::open(path, o);
    RetrievalCue own;
    own.method = RecallMethod::proj;
    own.proj = std::span<const float>(ps[2].proj.data(), L.proj_dim);
    const RecallHit h = s.query_retrieval(own, 1).at(0);
    ASSERT_EQ(h.episode_id, ids[2]);
    slot2 = h.slot;
  }
  {  // the third episode's projected rows become the largest f16 (65504)
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(L.ext_entry_offset(slot2) + L.ext_proj));
    const std::vector<uint16_t> big(size_t{4} * L.proj_dim, 0x7bff);
    f.write(reinterpret_cast<const char*>(big.data()),
            static_cast<std::streamsize>(big.size() * 2));
  }
  StoreOptions ro;
  ro.read_only = true;
  EpisodicStore s = EpisodicStore::open(path, ro);
  RetrievalCue cue;
  cue.method = RecallMethod::proj;
  cue.proj = std::span<const float>(ps[4].proj.data(), L.proj_dim);
  testing::internal::CaptureStderr();
  std::vector<RecallHit> hits = s.query_retrieval(cue, 1);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");  // the damaged one did not rank: not checked
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits[0].episode_id, ids[4]);
  EXPECT_EQ(s.damaged_retrieval_entries(), 0u);
  // A cue that its rows answer with a huge score: it ranks first until checked.
  std::vector<float> up(L.proj_dim, 1.0f / std::sqrt(static_cast<float>(L.proj_dim)));
  cue.proj = up;
  testing::internal::CaptureStderr();
  hits = s.query_retrieval(cue, 3);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find(fmt::format("retrieval entry of episode {}", ids[2])), std::string::npos)
      << err;
  ASSERT_EQ(hits.size(), 3u);
  for (const RecallHit& h : hits) {
    EXPECT_NE(h.episode_id, ids[2]);
    EXPECT_TRUE(std::isfinite(h.score));
  }
  EXPECT_EQ(s.damaged_retrieval_entries(), 1u);
  cue.proj = std::span<const float>(ps[2].proj.data(), L.proj_dim);
  hits = s.query_retrieval(cue, 5);  // every other episode, in order, and the damaged one never again
  ASSERT_EQ(hits.size(), 5u);
  for (size_t i = 1; i < hits.size(); ++i) EXPECT_GE(hits[i - 1].score, hits[i].score);
  for (const RecallHit& h : hits) EXPECT_NE(h.episode_id, ids[2]);
}

TEST(RetrievalStore, Version1StoresStillOpenAndRefuseAttentionQueries) {
  ScratchDir dir;
  StoreOptions o = test::not_durable();
  const std::string path = dir.file("v1.mem");
  EpisodicStore s = EpisodicStore::create(path, v2_geometry(0), 7, o);
  EXPECT_EQ(s.header().version, 1u);
  append(s, planted(s.layout(), 1, 3));
  StoreOptions ro;
  ro.read_only = true;
  EpisodicStore back = EpisodicStore::open(path, ro);
  EXPECT_EQ(back.live_count(), 1u);
  std::vector<float> q(2 * 2 * 8, 1.0f);
  RetrievalCue cue;
  cue.method = RecallMethod::keys;
  cue.queries = q;
  EXPECT_THROW(back.query_retrieval(cue, 1), Error);
  std::vector<float> c(24, 1.0f);
  EXPECT_EQ(back.query(c, 1).size(), 1u);
}

TEST(RetrievalStore, DamagedSectionHeaderIsRefused) {
  ScratchDir dir;
  StoreOptions o = test::not_durable();
  const std::string path = dir.file("v2.mem");
  uint64_t off = 0;
  {
    EpisodicStore s = EpisodicStore::create(path, v2_geometry(kRetrievalKeys), 7, o);
    off = s.layout().ext_offset;
  }
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(off + 20));  // keys_per_head
  const uint32_t r = 4;
  f.write(reinterpret_cast<const char*>(&r), 4);
  f.close();
  try {
    EpisodicStore::open(path, {});
    FAIL() << "opened a damaged section header";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("retrieval section"), std::string::npos) << e.what();
  }
}

// --- recall@k through a live session ------------------------------------------------------

// A gemma3 micro model (layers 0, 1 sliding, 2 global) whose global layer's KV head h has the
// key projection and norm of query head h * group, and whose retrieval head has W_key = W_query.
std::shared_ptr<const Model> matched_model() {
  RandomModelSpec s = test::micro_model_spec(Arch::gemma3, 11);
  s.hidden = 48;
  s.head_dim = 16;
  s.ffn = 64;
  s.vocab = 400;
  s.retrieval_dim = 24;
  ThreadPool pool(1);
  GgufWriter first;
  write_random_model(s, first, pool);
  const std::vector<uint8_t> bytes0 = first.to_bytes();
  const GgufFile g = GgufFile::from_memory(bytes0.data(), bytes0.size(), "first");
  const TensorInfo* wq = g.find_tensor("blk.2.attn_q.weight");
  const TensorInfo* qn = g.find_tensor("blk.2.attn_q_norm.weight");
  const size_t E = 48, hd = 16, group = 2;
  std::vector<uint8_t> wk(2 * hd * E * 4);
  for (size_t h = 0; h < 2; ++h)
    std::memcpy(wk.data() + h * hd * E * 4, wq->data + (h * group) * hd * E * 4, hd * E * 4);
  std::vector<uint8_t> kn(qn->data, qn->data + qn->n_bytes);
  GgufWriter w;
  write_random_model(s, w, pool,
                     {"blk.2.attn_k.weight", "blk.2.attn_k_norm.weight", "channel.retrieval.key"});
  w.add_tensor("blk.2.attn_k.weight", GgmlType::F32, {int64_t(E), int64_t(2 * hd)}, wk);
  w.add_tensor("blk.2.attn_k_norm.weight", GgmlType::F32, {int64_t(hd)}, kn);
  w.set_f32_array("channel.retrieval.key", g.get_f32_array("channel.retrieval.query"));
  auto bytes = std::make_shared<std::vector<uint8_t>>(w.to_bytes());
  auto m = Model::load_from_memory(*bytes, "matched.gguf");
  return std::shared_ptr<const Model>(m.get(), [m, bytes](const Model*) {});
}

RingSessionConfig small_geometry() {
  return test::micro_ring_config(RingConfig{64, 24, 4, 0});
}

// A scratch store of the model's geometry for max_episodes episodes of up to 16 tokens.
EpisodicStore session_store(const Model& model, const ScratchDir& dir, uint32_t max_episodes) {
  return EpisodicStore::create(dir.file("s.mem"), session_store_geometry(model, max_episodes, 16),
                               model_id_hash(model.gguf()), test::not_durable());
}

MemoryConfig staging16() {
  MemoryConfig mc;
  mc.staging.capacity = 16;
  return mc;
}

MemoryConfig no_consolidation() {
  MemoryConfig mc;
  mc.consolidate = false;
  return mc;
}

// A stream session over `model` with its system span (BOS) sealed and memory attached.
struct MemorySession {
  MemorySession(std::shared_ptr<const Model> model, EpisodicStore& store, MemoryConfig mc)
      : ss(std::move(model), small_geometry(), SamplerConfig{}), mem(sealed(ss), store, mc) {}
  static RingSession& sealed(StreamSession& s) {
    const int32_t bos = 2;
    s.append(SpanType::system, {&bos, 1});
    s.seal();
    return s.ring_session();
  }
  StreamSession ss;
  MemoryAttachment mem;
};

// Twelve user turns of 6 distinct tokens, each closed by a turn_end, consolidated: the store
// the automatic-recall tests query.
void feed_twelve_turns(StreamSession& ss, MemoryAttachment& mem) {
  const int32_t turn_end = 1;
  for (int i = 0; i < 12; ++i) {
    std::vector<int32_t> t(6);
    for (int j = 0; j < 6; ++j) t[j] = 10 + i * 6 + j;
    ss.append(SpanType::user, t);
    ss.append(SpanType::turn_end, {&turn_end, 1});
  }
  mem.flush();
}

TEST(RetrievalRecall, PlantedEpisodesAreFoundByKeysAndProj) {
  const auto model = matched_model();
  ScratchDir dir;
  EpisodicStore store = session_store(*model, dir, 256);
  ASSERT_TRUE(store.layout().has_keys());
  ASSERT_TRUE(store.layout().has_proj());
  // 40 episodes of 8 distinct tokens each (no token in two episodes), each a turn of its own.
  const int n_eps = 40, n_tok = 8;
  std::vector<int32_t> pool_ids;
  for (int32_t t = 4; t < 4 + n_eps * n_tok; ++t) pool_ids.push_back(t);
  std::shuffle(pool_ids.begin(), pool_ids.end(), std::mt19937(3));
  auto episode = [&](int i) {
    return std::vector<int32_t>(pool_ids.begin() + i * n_tok, pool_ids.begin() + (i + 1) * n_tok);
  };
  std::vector<uint64_t> id_of(n_eps);
  {
    MemorySession session(model, store, staging16());
    StreamSession& ss = session.ss;
    MemoryAttachment& mem = session.mem;
    const int32_t turn_end = 1;
    for (int i = 0; i < n_eps; ++i) {
      ss.append(SpanType::user, episode(i));
      ss.append(SpanType::turn_end, {&turn_end, 1});
    }
    mem.consolidate_window();
  }
  // Map each planted episode to its id by its tokens.
  for (const EpisodeHeader& h : store.list()) {
    const Episode e = store.read(h.episode_id);
    for (int i = 0; i < n_eps; ++i)
      if (e.tokens.size() >= 8 && std::equal(e.tokens.begin(), e.tokens.begin() + 8,
                                            episode(i).begin()))
        id_of[i] = h.episode_id;
  }
  // Cues: the same content in a fresh session, its last token's state.
  int found_keys = 0, found_proj = 0, found_hybrid = 0;
  const int n_cues = 12;
  for (int i = 0; i < n_cues; ++i) {
    const int e = i * 3;
    MemorySession session(model, store, no_consolidation());
    StreamSession& ss = session.ss;
    MemoryAttachment& mem = session.mem;
    ss.feed(SpanType::user, episode(e));
    const CueState cue = mem.current_cue();
    ASSERT_EQ(cue.queries.size(), ss.ring_session().query_dim());
    auto top = [&](RecallMethod m) {
      for (const RecallHit& h : mem.query_state(cue, m, 3))
        if (h.episode_id == id_of[e]) return 1;
      return 0;
    };
    found_keys += top(RecallMethod::keys);
    found_proj += top(RecallMethod::proj);
    found_hybrid += top(RecallMethod::hybrid);
    EXPECT_EQ(mem.resolve(RecallMethod::automatic), RecallMethod::proj);
  }
  // recall@3 over the cues (a random model: most, not all, by construction).
  EXPECT_GE(found_keys, n_cues * 2 / 3) << "keys " << found_keys << "/" << n_cues;
  EXPECT_GE(found_proj, n_cues * 2 / 3) << "proj " << found_proj << "/" << n_cues;
  std::printf("recall@3 over %d cues: keys %d, proj %d, hybrid %d\n", n_cues, found_keys,
              found_proj, found_hybrid);
}

TEST(RetrievalRecall, AutoRecallKeepsTier3AsACache) {
  const auto model = matched_model();
  ScratchDir dir;
  EpisodicStore store = session_store(*model, dir, 64);
  MemorySession session(model, store, staging16());
  StreamSession& ss = session.ss;
  MemoryAttachment& mem = session.mem;
  feed_twelve_turns(ss, mem);
  ASSERT_GT(store.live_count(), 3u);
  AutoRecallConfig ac;
  ac.k = 2;
  ac.min_score_ratio = 0.0f;  // both hits placed, whatever their scores
  AutoRecall ar(mem, ac);
  std::vector<RecallEvent> seen;
  ar.set_listener([&](const RecallEvent& e) { seen.push_back(e); });
  const RecallEvent a = ar.recall_now();
  EXPECT_EQ(a.method, RecallMethod::proj);
  EXPECT_EQ(a.hits.size(), 2u);
  EXPECT_EQ(a.recalled.size() + a.kept.size(), 2u);
  EXPECT_EQ(ss.ring_session().ring().recall_episodes().size(), 2u);
  // The same cue again: everything is kept, nothing released.
  const RecallEvent b = ar.recall_now();
  EXPECT_TRUE(b.recalled.empty());
  EXPECT_TRUE(b.released.empty());
  EXPECT_EQ(b.kept.size(), 2u);
  EXPECT_EQ(seen.size(), 2u);
  // A turn fed through feed_turn_with_recall: recall lands before its last token.
  std::vector<int32_t> q = {10, 11, 12, 13};
  const uint64_t clock = ss.clock();
  const RecallEvent c = feed_turn_with_recall(ss, ar, q, SpanType::user);
  EXPECT_EQ(ss.clock(), clock + q.size());
  EXPECT_EQ(c.clock, clock + q.size() - 1);
  EXPECT_FALSE(c.hits.empty());
}

TEST(RetrievalRecall, TheScoreGatePlacesOnlyHitsNearTheBest) {
  const auto model = matched_model();
  ScratchDir dir;
  EpisodicStore store = session_store(*model, dir, 64);
  MemorySession session(model, store, staging16());
  StreamSession& ss = session.ss;
  MemoryAttachment& mem = session.mem;
  feed_twelve_turns(ss, mem);
  for (const float ratio : {0.0f, 0.999f}) {
    AutoRecallConfig ac;
    ac.k = 3;
    ac.min_score_ratio = ratio;
    AutoRecall ar(mem, ac);
    const RecallEvent e = ar.recall_now();
    ASSERT_EQ(e.hits.size(), 3u);  // the ranking is reported whole
    const float best = e.hits[0].score;
    ASSERT_GT(best, 0.0f);  // z-scored: the best of several distinct scores is above the mean
    std::set<uint64_t> gated, placed;
    for (const RecallHit& h : e.hits)
      (&h != &e.hits[0] && h.score < ratio * best ? gated : placed).insert(h.episode_id);
    EXPECT_EQ(std::set<uint64_t>(e.below_gate.begin(), e.below_gate.end()), gated);
    std::set<uint64_t> active;
    for (const RecallEpisode& r : ss.ring_session().ring().recall_episodes()) active.insert(r.id);
    EXPECT_EQ(active, placed) << "ratio " << ratio;
    if (ratio == 0.0f) EXPECT_TRUE(e.below_gate.empty());
    else EXPECT_FALSE(e.below_gate.empty()) << "distinct scores: all but the best are gated";
  }
}

TEST(RetrievalRecall, NeighboursComeWhereTier3HasRoom) {
  const auto model = matched_model();
  ScratchDir dir;
  EpisodicStore store = session_store(*model, dir, 64);
  MemorySession session(model, store, staging16());  // tier 3: 24 slots
  StreamSession& ss = session.ss;
  MemoryAttachment& mem = session.mem;
  const int32_t turn_end = 1;
  for (int i = 0; i < 12; ++i) {  // episodes of 5 tokens (4 + turn_end), a lineage
    std::vector<int32_t> t(4);
    for (int j = 0; j < 4; ++j) t[j] = 100 + i * 4 + j;
    ss.append(SpanType::user, t);
    ss.append(SpanType::turn_end, {&turn_end, 1});
  }
  mem.flush();
  AutoRecallConfig ac;
  ac.k = 1;
  ac.neighbours = 1;
  AutoRecall ar(mem, ac);
  const RecallEvent e = ar.recall_now();
  ASSERT_EQ(e.hits.size(), 1u);
  const uint64_t hit = e.hits[0].episode_id;
  ASSERT_FALSE(e.neighbours.empty());
  for (uint64_t n : e.neighbours) EXPECT_TRUE(n + 1 == hit || n == hit + 1) << n << " " << hit;
  std::vector<uint64_t> active;
  for (const RecallEpisode& r : ss.ring_session().ring().recall_episodes()) active.push_back(r.id);
  EXPECT_EQ(active.size(), 1 + e.neighbours.size());
  // The same cue again: the hit and its neighbours all stay.
  const RecallEvent again = ar.recall_now();
  EXPECT_TRUE(again.released.empty());
  EXPECT_EQ(again.kept.size(), active.size());
}

// A turn longer than an episode holds is cut at capacity inside its span: the two halves of
// its text are two episodes, and a recall of either brings the other, in order.
TEST(RetrievalRecall, AnEpisodeCutInsideASpanComesWithItsOtherHalf) {
  const auto model = matched_model();
  ScratchDir dir;
  EpisodicStore store = session_store(*model, dir, 64);  // episodes of at most 16 tokens
  MemorySession session(model, store, staging16());      // tier 3: 24 slots
  StreamSession& ss = session.ss;
  MemoryAttachment& mem = session.mem;
  std::vector<int32_t> turn(20);
  for (int j = 0; j < 20; ++j) turn[j] = 50 + j;
  const int32_t turn_end = 1;
  ss.append(SpanType::user, turn);  // one span of 20 tokens: cut at 16, the rest with the turn end
  ss.append(SpanType::turn_end, {&turn_end, 1});
  mem.consolidate_window();
  const std::vector<EpisodeHeader> eps = store.list();
  ASSERT_EQ(eps.size(), 2u);
  ASSERT_EQ(eps[0].token_count, 16u);
  ASSERT_EQ(eps[1].token_count, 5u);
  AutoRecallConfig ac;
  ac.k = 1;
  AutoRecall ar(mem, ac);
  const RecallEvent e = ar.recall_now();
  ASSERT_EQ(e.hits.size(), 1u);
  const uint64_t hit = e.hits[0].episode_id;
  const uint64_t other = hit == eps[0].episode_id ? eps[1].episode_id : eps[0].episode_id;
  EXPECT_EQ(e.neighbours, std::vector<uint64_t>{other});
  // Tier 3 reads the sentence in order: the first half at the lower virtual positions.
  const auto active = ss.ring_session().ring().recall_episodes();
  ASSERT_EQ(active.size(), 2u);
  const auto& first = active[0].stored_pos < active[1].stored_pos ? active[0] : active[1];
  EXPECT_EQ(first.id, eps[0].episode_id);
}

// Recall copy through a live session: once an episode is in tier 3, a context that repeats two
// of its tokens lends the token after them the bias; released, it lends nothing.
TEST(RetrievalRecall, TheRecalledEpisodesTokensBiasTheirContinuation) {
  const auto model = matched_model();
  ScratchDir dir;
  EpisodicStore store = session_store(*model, dir, 64);
  MemorySession session(model, store, staging16());
  StreamSession& ss = session.ss;
  MemoryAttachment& mem = session.mem;
  feed_twelve_turns(ss, mem);
  const std::vector<EpisodeHeader> eps = store.list();
  ASSERT_FALSE(eps.empty());
  const Episode ep = store.read(eps[0].episode_id);
  ASSERT_GE(ep.tokens.size(), 3u);
  EXPECT_EQ(store.read_tokens(ep.header.episode_id), ep.tokens);
  std::vector<float> logits(ss.logits().size(), 0.0f);
  EXPECT_EQ(mem.bias_toward_recalled(logits), 0u);  // nothing recalled yet
  mem.recall(ep.header.episode_id);
  ss.feed(SpanType::user, std::span<const int32_t>(ep.tokens).first(2));
  EXPECT_EQ(mem.bias_toward_recalled(logits), 2u);
  for (size_t t = 0; t < logits.size(); ++t)
    EXPECT_EQ(logits[t], int32_t(t) == ep.tokens[2] ? kDefaultRecallCopyBias : 0.0f) << t;
  // The sampler of a front end sees it through its logit bias.
  ss.sampler().set_logit_bias(
      [&mem](size_t n, std::vector<LogitEdit>& e) { mem.recalled_bonus(n, e); });
  SamplerConfig greedy;
  greedy.temperature = 0.0f;
  ss.sampler() = ss.sampler().reconfigured(greedy);
  std::vector<float> flat(ss.logits().size(), 0.0f);
  EXPECT_EQ(ss.sampler().sample(flat), ep.tokens[2]);
  ss.sampler().set_logit_bias({});
  mem.release_all();
  std::fill(logits.begin(), logits.end(), 0.0f);
  EXPECT_EQ(mem.bias_toward_recalled(logits), 0u);
}

}  // namespace
}  // namespace channel
