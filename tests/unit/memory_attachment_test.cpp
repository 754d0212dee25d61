// Episodic memory attached to a RingSession (micro llama and gemma3 models): under aggressive
// eviction the K/V and hidden states staged for each evicted token equal exactly what its
// slots and the token tap held; recalled episodes injected at the same relative distance give
// the logits of the original context; the recall tier evicts the least recently recalled
// episode; mismatched stores are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "gguf/gguf_writer.h"
#include "memory/memory_attachment.h"
#include "gguf/model_signature.h"
#include "memory_test_util.h"
#include "model/model.h"
#include "model/random_model.h"
#include "ops/fp16.h"
#include "runtime/ring_session.h"
#include "support/micro_model.h"
#include "util/error.h"

namespace channel {
namespace {

using test::ScratchDir;

// The shared micro model (tests/support) with `layers` layers.
std::shared_ptr<const Model> micro(Arch arch, int layers, uint64_t seed = 5) {
  RandomModelSpec s = test::micro_model_spec(arch, seed);
  s.layers = layers;
  return test::load_model(s);
}

RingSessionConfig geometry(uint32_t n_slots = 96, uint32_t n_recall = 32) {
  return test::micro_ring_config(RingConfig{n_slots, n_recall, 0, 0});
}

EpisodicStore scratch_store(const ScratchDir& dir, const Model& m, uint32_t max_tokens) {
  StoreOptions o = test::not_durable();
  return EpisodicStore::create(dir.file("s.episodic.mem"),
                               session_store_geometry(m, 256, max_tokens), model_id_hash(m.gguf()),
                               o);
}

std::vector<int32_t> tokens_of(uint64_t seed, size_t n) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(4 + rng() % 290);
  return t;
}

const std::vector<int32_t> kAnchors = {2, 40, 41, 42, 43};

void boot(RingSession& s) {
  s.append(SpanType::system, kAnchors);
  s.seal();
}

// K/V rows of every global layer at `slot`: [n_global][2][kv_dim].
std::vector<float> slot_rows(const RingSession& s, uint32_t slot) {
  const ModelHparams& hp = s.model().hparams();
  const size_t hd = hp.head_dim, nkv = hp.n_head_kv;
  std::vector<float> out;
  for (int il : s.global_layers()) {
    for (int kv = 0; kv < 2; ++kv) {
      const auto arena = kv == 0 ? s.layer_k(il) : s.layer_v(il);
      for (size_t h = 0; h < nkv; ++h) {
        const float* p = arena.data() + (h * s.layer_slots(il) + slot) * hd;
        out.insert(out.end(), p, p + hd);
      }
    }
  }
  return out;
}

void aggressive_eviction(Arch arch, int layers) {
  const auto model = micro(arch, layers);
  const size_t E = model->hparams().n_embd;
  ScratchDir dir;
  EpisodicStore store = scratch_store(dir, *model, 16);
  RingSessionConfig cfg = geometry(40, 8);  // a window of 27 slots: constant eviction
  RingSession session(model, cfg);
  boot(session);

  std::map<uint64_t, std::vector<float>> kv_at;      // clock -> rows right after its forward
  std::map<uint64_t, std::vector<float>> hidden_at;  // clock -> x (last token of each append)
  std::map<uint64_t, int32_t> token_at;
  std::vector<StagedEpisode> seen;
  MemoryConfig mc;
  mc.staging.capacity = 16;
  mc.on_episode = [&](const StagedEpisode& e) { seen.push_back(e); };
  size_t checked_hidden = 0;
  {
    MemoryAttachment mem(session, store, mc);
    std::mt19937 rng(7);
    uint64_t clock = session.ring().clock();
    for (int step = 0; step < 160; ++step) {
      // Spans of 1..12 tokens, and now and then one longer than the window (cut rule).
      const size_t n = step % 23 == 22 ? 40 : 1 + rng() % 12;
      const auto toks = tokens_of(1000 + step, n);
      const SpanType type = static_cast<SpanType>(1 + rng() % 6);
      // Appended in pieces of at most 3 so that x of each piece's last token is observed.
      for (size_t done = 0; done < n;) {
        const size_t m = std::min<size_t>(3, n - done);
        std::span<const int32_t> piece(toks.data() + done, m);
        if (done == 0) {
          session.append(type, piece);
        } else {
          session.decode(piece);
        }
        for (size_t i = 0; i < m; ++i, ++clock) {
          kv_at[clock] = slot_rows(session, session.ring().geometry().slot_of(clock));
          token_at[clock] = piece[i];
        }
        const auto x = mem.current_state();
        hidden_at[clock - 1].assign(x.begin(), x.end());
        done += m;
      }
    }
    mem.flush();
    const MemoryStats st = mem.stats();
    EXPECT_EQ(st.worker.dropped, 0u);
    EXPECT_EQ(st.worker.failed, 0u);
    EXPECT_EQ(st.worker.written, seen.size());
    EXPECT_GT(session.ring().evicted_spans(), 100u);
    EXPECT_EQ(st.tokens_staged, session.ring().oldest() - kAnchors.size());
  }
  ASSERT_GT(seen.size(), 20u);
  const size_t row = session.global_layers().size() * 2 * store.layout().kv_dim;
  uint64_t next = kAnchors.size();
  for (const StagedEpisode& e : seen) {
    ASSERT_EQ(e.start_clock, next) << "episodes must tile the evicted clocks";
    for (size_t i = 0; i < e.size(); ++i) {
      const uint64_t c = e.start_clock + i;
      ASSERT_EQ(e.tokens[i], token_at.at(c)) << "clock " << c;
      ASSERT_EQ(0, std::memcmp(e.kv.data() + i * row, kv_at.at(c).data(), row * sizeof(float)))
          << "K/V of clock " << c << " differs from what its slot held";
      if (auto it = hidden_at.find(c); it != hidden_at.end()) {
        ASSERT_EQ(0, std::memcmp(e.hidden.data() + i * E, it->second.data(), E * sizeof(float)));
        ++checked_hidden;
      }
    }
    next += e.size();
  }
  EXPECT_GT(checked_hidden, 100u);
  // The store holds every episode, and its K/V is the f16 rounding of the slot contents.
  const auto stored = store.list();
  ASSERT_EQ(stored.size(), seen.size());
  for (size_t j = 0; j < seen.size(); ++j) {
    const Episode ep = store.read(stored[j].episode_id);
    ASSERT_EQ(ep.header.start_clock, seen[j].start_clock);
    ASSERT_EQ(ep.tokens, seen[j].tokens);
    const size_t n = ep.tokens.size(), D = store.layout().kv_dim;
    for (size_t g = 0; g < session.global_layers().size(); ++g)
      for (size_t kv = 0; kv < 2; ++kv)
        for (size_t t = 0; t < n; ++t)
          for (size_t d = 0; d < D; ++d) {
            const float want = seen[j].kv[t * row + (2 * g + kv) * D + d];
            ASSERT_EQ(ep.kv[((2 * g + kv) * n + t) * D + d], fp16_to_fp32(fp32_to_fp16(want)));
          }
    if (j > 0) {
      EXPECT_EQ(ep.header.parent_episode_id, stored[j - 1].episode_id);
    }
  }
}

TEST(MemoryAttachment, EvictedKvEqualsSlotContentsLlama) {
  aggressive_eviction(Arch::llama, 2);
}

TEST(MemoryAttachment, EvictedKvEqualsSlotContentsGemma3GlobalLayersOnly) {
  aggressive_eviction(Arch::gemma3, 3);
}

TEST(MemoryAttachment, ProbeTokensAreNeverStaged) {
  const auto model = micro(Arch::llama, 1);
  ScratchDir dir;
  EpisodicStore store = scratch_store(dir, *model, 8);
  RingSession session(model, geometry(32, 8));
  boot(session);
  std::vector<StagedEpisode> seen;
  MemoryConfig mc;
  mc.staging.capacity = 8;
  mc.on_episode = [&](const StagedEpisode& e) { seen.push_back(e); };
  MemoryAttachment mem(session, store, mc);
  const auto toks = tokens_of(3, 200);
  for (size_t i = 0; i < toks.size(); i += 5) {
    session.append(SpanType::user, std::span<const int32_t>(toks.data() + i, 5));
    if (session.max_probe() >= 2) session.probe(std::vector<int32_t>{7, 8});
  }
  mem.flush();
  std::vector<int32_t> staged;
  for (const auto& e : seen) staged.insert(staged.end(), e.tokens.begin(), e.tokens.end());
  ASSERT_FALSE(staged.empty());
  EXPECT_TRUE(std::equal(staged.begin(), staged.end(), toks.begin()));
}

// Logits of the last token of `y` after the given history.
std::vector<float> run_history(const std::shared_ptr<const Model>& model,
                               const std::vector<std::vector<int32_t>>& spans) {
  RingSession s(model, geometry());
  boot(s);
  std::span<const float> logits;
  for (const auto& sp : spans) logits = s.append(SpanType::user, sp);
  return {logits.begin(), logits.end()};
}

float max_abs_diff(std::span<const float> a, std::span<const float> b) {
  float d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

float max_abs(std::span<const float> a) {
  float d = 0;
  for (float x : a) d = std::max(d, std::abs(x));
  return d;
}

// Streams `before`, `episode`, then filler until everything is evicted; each of the first
// spans becomes one episode (their sizes equal the staging capacity). Returns the ids.
std::vector<uint64_t> consolidate(const std::shared_ptr<const Model>& model, EpisodicStore& store,
                                  const std::vector<std::vector<int32_t>>& spans, uint32_t cap) {
  RingSession s(model, geometry());
  boot(s);
  MemoryConfig mc;
  mc.staging.capacity = cap;
  MemoryAttachment mem(s, store, mc);
  for (const auto& sp : spans) s.append(SpanType::user, sp);
  for (int i = 0; i < 12; ++i) s.append(SpanType::user, tokens_of(900 + i, cap));
  mem.flush();
  std::vector<uint64_t> ids;
  for (const auto& h : store.list()) ids.push_back(h.episode_id);
  return ids;
}

// One layer: K/V depend only on the token and its position, so an episode consolidated at
// clocks 29.. and recalled next to the anchors must reproduce the context where the same
// tokens were written right after the anchors. Keys are re-rotated by Δ = -24 and -12.
TEST(MemoryAttachment, RecalledEpisodeAtSameRelativeDistanceGivesOriginalLogits) {
  const auto model = micro(Arch::llama, 1);
  ScratchDir dir;
  EpisodicStore store = scratch_store(dir, *model, 12);
  const auto f1 = tokens_of(11, 12), f2 = tokens_of(12, 12), x = tokens_of(13, 12);
  const auto y = tokens_of(14, 10);
  const auto ids = consolidate(model, store, {f1, f2, x}, 12);
  ASSERT_GE(ids.size(), 3u);
  ASSERT_EQ(store.read(ids[0]).tokens, f1);
  ASSERT_EQ(store.read(ids[2]).tokens, x);
  ASSERT_EQ(store.read(ids[2]).header.start_clock, kAnchors.size() + 24);

  const auto original = run_history(model, {x, y});
  const auto without = run_history(model, {y});
  RingSession s(model, geometry());
  boot(s);
  {
    MemoryConfig mc;
    mc.consolidate = false;
    MemoryAttachment mem(s, store, mc);
    const RecallResult r = mem.recall(ids[2]);
    EXPECT_EQ(r.stored_pos, kAnchors.size());
    EXPECT_EQ(r.n_tokens, 12u);
    const auto logits = s.append(SpanType::user, y);
    const float scale = max_abs(original);
    const float err = max_abs_diff(logits, original);
    const float gap = max_abs_diff(without, original);
    EXPECT_LT(err, 2e-3f * scale) << "err " << err << " scale " << scale;
    EXPECT_GT(gap, 20 * err) << "the test must be able to tell recall from no recall";
    EXPECT_EQ(store.find(ids[2])->access_count, 1u);
  }
  // Two episodes, activated in order: the second sits after the first (Δ = -12).
  const auto original2 = run_history(model, {f1, x, y});
  RingSession s2(model, geometry());
  boot(s2);
  MemoryConfig mc;
  mc.consolidate = false;
  MemoryAttachment mem(s2, store, mc);
  mem.recall(ids[0]);
  const RecallResult r2 = mem.recall(ids[2]);
  EXPECT_EQ(r2.stored_pos, kAnchors.size() + 12);
  const auto logits2 = s2.append(SpanType::user, y);
  EXPECT_LT(max_abs_diff(logits2, original2), 2e-3f * max_abs(original2));
}

// Several layers: the recalled episode was written right after the anchors (Δ = 0), so its
// K/V are those of the original context at every layer. (With sliding layers the two
// contexts differ by design: a sliding layer sees the window, never recalled K/V.)
TEST(MemoryAttachment, RecalledEpisodeMatchesOriginalContextDeepModel) {
  const auto model = micro(Arch::llama, 3);
  ScratchDir dir;
  EpisodicStore store = scratch_store(dir, *model, 12);
  const auto x = tokens_of(21, 12), y = tokens_of(22, 6);
  const auto ids = consolidate(model, store, {x}, 12);
  ASSERT_EQ(store.read(ids[0]).tokens, x);
  RingSession s(model, geometry());
  boot(s);
  MemoryConfig mc;
  mc.consolidate = false;
  MemoryAttachment mem(s, store, mc);
  EXPECT_EQ(mem.recall(ids[0]).stored_pos, kAnchors.size());
  const auto logits = s.append(SpanType::user, y);
  const auto original = run_history(model, {x, y});
  EXPECT_LT(max_abs_diff(logits, original), 2e-3f * max_abs(original));
}

TEST(MemoryAttachment, RecallTierEvictsLeastRecentlyRecalled) {
  const auto model = micro(Arch::llama, 1);
  ScratchDir dir;
  EpisodicStore store = scratch_store(dir, *model, 8);
  const auto ids =
      consolidate(model, store, {tokens_of(31, 8), tokens_of(32, 8), tokens_of(33, 8)}, 8);
  ASSERT_GE(ids.size(), 3u);
  RingSession s(model, geometry(64, 16));  // room for two episodes of 8
  boot(s);
  MemoryConfig mc;
  mc.consolidate = false;
  MemoryAttachment mem(s, store, mc);
  EXPECT_TRUE(mem.recall(ids[0]).released.empty());
  EXPECT_TRUE(mem.recall(ids[1]).released.empty());
  EXPECT_TRUE(mem.recall(ids[0]).already_active);  // ids[1] is now the least recent
  const RecallResult r = mem.recall(ids[2]);
  ASSERT_EQ(r.released, std::vector<uint64_t>{ids[1]});
  std::vector<uint64_t> active;
  for (const auto& e : s.ring().recall_episodes()) active.push_back(e.id);
  EXPECT_EQ(active, (std::vector<uint64_t>{ids[0], ids[2]}));
  EXPECT_EQ(r.stored_pos, kAnchors.size() + 8);
  EXPECT_EQ(store.find(ids[0])->access_count, 2u);
  EXPECT_GT(store.find(ids[0])->last_accessed, 0u);
  EXPECT_EQ(mem.stats().recall_evictions, 1u);
  // Query by the current state returns stored episodes, best first.
  s.append(SpanType::user, tokens_of(32, 8));
  const auto hits = mem.query(mem.current_state(), 3);
  ASSERT_EQ(hits.size(), 3u);
  EXPECT_GE(hits[0].score, hits[1].score);
  mem.release_all();
  EXPECT_EQ(s.ring().recall_used(), 0u);
  EXPECT_THROW(mem.recall(12345), Error);
}

TEST(MemoryAttachment, MismatchedStoresAreRefusedAndLeftUntouched) {
  const auto model = micro(Arch::llama, 2);
  const auto other = micro(Arch::llama, 2, 99);
  ScratchDir dir;
  const std::string path = dir.file("m.episodic.mem");
  bool created = false;
  { EpisodicStore s = open_or_create_store(path, *model, 16, 8, &created); }
  EXPECT_TRUE(created);
  { EpisodicStore s = open_or_create_store(path, *model, 16, 8, &created); }
  EXPECT_FALSE(created);
  const auto before = test::read_bytes(path);
  try {
    open_or_create_store(path, *other, 16, 8);
    FAIL() << "another model's store was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("another model"), std::string::npos) << e.what();
  }
  EXPECT_EQ(test::read_bytes(path), before);
  // A store of the right model with the wrong geometry (all layers of a gemma3) is refused.
  const auto gem = micro(Arch::gemma3, 3);
  StoreGeometry g = session_store_geometry(*gem, 4, 8);
  EXPECT_EQ(g.num_layers, 1u);
  g.num_layers = 3;
  EpisodicStore wrong = EpisodicStore::create(dir.file("w.mem"), g, model_id_hash(gem->gguf()));
  RingSession s(gem, geometry());
  EXPECT_THROW({ MemoryAttachment m(s, wrong); }, Error);
  // Episodes longer than the store's episodes are refused up front.
  EpisodicStore small = EpisodicStore::create(
      dir.file("small.mem"), session_store_geometry(*gem, 4, 8), model_id_hash(gem->gguf()));
  MemoryConfig mc;
  mc.staging.capacity = 64;
  EXPECT_THROW({ MemoryAttachment m(s, small, mc); }, Error);
}

}  // namespace
}  // namespace channel
