// Rehydrating from the store into strided targets: straight into slot arenas is
// bit-identical to dense buffers then a copy, serial or split over a pool; f16 targets are
// the dense values rounded to f16; bad targets are refused.
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/thread_pool.h"
#include "gguf/gguf_writer.h"
#include "kv/kv_rows.h"
#include "memory/episodic_store.h"
#include "memory/memory_attachment.h"
#include "gguf/model_signature.h"
#include "memory/rehydrate_kernels.h"
#include "memory/rerotate.h"
#include "memory_test_util.h"
#include "model/model.h"
#include "model/random_model.h"
#include "ops/fp16.h"
#include "runtime/ring_session.h"
#include "util/aligned_vector.h"
#include "util/error.h"

namespace channel {
namespace {

constexpr float kSentinel = -12345.5f;

// --- the store into strided targets -----------------------------------------------------

struct StoreCase {
  const char* name;
  RopeStyle style;
  uint32_t n_heads, head_dim, n_rot;
  SlabType slab;
};

const StoreCase kStoreCases[] = {
    {"neox_f16", RopeStyle::neox, 2, 64, 64, SlabType::f16},
    {"normal_f16", RopeStyle::normal, 3, 34, 34, SlabType::f16},
    {"partial_neox_f16", RopeStyle::neox, 2, 96, 32, SlabType::f16},
    {"partial_normal_q8", RopeStyle::normal, 1, 96, 20, SlabType::q8_0},
    {"neox_q8", RopeStyle::neox, 4, 16, 16, SlabType::q8_0},
};

TEST(MemoryRehydrate, ArenaTargetIsBitIdenticalToDenseThenCopy) {
  test::ScratchDir dir;
  ThreadPool pool(3);
  for (const StoreCase& sc : kStoreCases) {
    const RotaryDims r = RotaryDims::make(sc.style, sc.n_heads, sc.head_dim, sc.n_rot, 1e6);
    const RotationTable table(r);
    const uint32_t L = 3, D = r.row_dim(), hd = sc.head_dim;
    StoreGeometry g;
    g.num_layers = L;
    g.hidden_size = 16;
    g.kv_dim = D;
    g.max_episodes = 4;
    g.max_tokens = 40;
    g.slab_type = sc.slab;
    StoreOptions o = test::not_durable();
    EpisodicStore store = EpisodicStore::create(dir.file(std::string(sc.name) + ".mem"), g, 1, o);
    for (size_t n : {1u, 7u, 33u}) {
      const test::SyntheticEpisode ep(store.layout(), n, n);
      const uint64_t id = store.append(ep.record(1000));
      for (double delta : {0.0, -977.0, 5e5, 0.5}) {
        // Two-step: dense [L][n][D], then the copy inject_recall makes into arenas.
        std::vector<float> k(L * n * D), v(k.size());
        store.rehydrate(id, {&r, 1}, delta, k.data(), v.data());
        const uint32_t n_slots = 50, first = 9;
        const size_t arena = size_t{sc.n_heads} * n_slots * hd;  // [n_heads][n_slots][hd]
        std::vector<std::vector<float>> want_k(L, std::vector<float>(arena, kSentinel));
        std::vector<std::vector<float>> want_v = want_k;
        for (uint32_t l = 0; l < L; ++l)
          for (size_t t = 0; t < n; ++t)
            for (uint32_t h = 0; h < sc.n_heads; ++h) {
              const size_t src = (l * n + t) * D + h * hd, dst = (h * n_slots + first + t) * hd;
              std::memcpy(&want_k[l][dst], &k[src], hd * sizeof(float));
              std::memcpy(&want_v[l][dst], &v[src], hd * sizeof(float));
            }
        // Fused: straight into the arenas, plain / with the table / split over a pool.
        for (int mode = 0; mode < 3; ++mode) {
          std::vector<std::vector<float>> got_k(L, std::vector<float>(arena, kSentinel));
          std::vector<std::vector<float>> got_v = got_k;
          std::vector<float*> kp, vp;
          for (uint32_t l = 0; l < L; ++l) {
            kp.push_back(got_k[l].data());
            vp.push_back(got_v[l].data());
          }
          RehydrateOptions ro;
          if (mode >= 1) ro.tables = {&table, 1};
          if (mode == 2) ro.pool = &pool;
          store.rehydrate(id, {&r, 1}, delta,
                          slot_arena_rows(kp, vp, n_slots, hd, first, static_cast<uint32_t>(n)),
                          ro);
          if (mode == 0 || delta != std::floor(delta)) {  // same angles as the dense call
            for (uint32_t l = 0; l < L; ++l) {
              ASSERT_EQ(0, std::memcmp(got_k[l].data(), want_k[l].data(), arena * 4))
                  << sc.name << " n=" << n << " delta=" << delta << " layer " << l;
              ASSERT_EQ(0, std::memcmp(got_v[l].data(), want_v[l].data(), arena * 4));
            }
          } else {  // composed angles: the same to f32 rounding
            for (uint32_t l = 0; l < L; ++l) {
              ASSERT_EQ(0, std::memcmp(got_v[l].data(), want_v[l].data(), arena * 4));
              for (size_t i = 0; i < arena; ++i)
                ASSERT_NEAR(got_k[l][i], want_k[l][i], 1e-6f * (1.0f + std::fabs(want_k[l][i])))
                    << sc.name << " n=" << n << " delta=" << delta << " mode " << mode;
            }
          }
        }
      }
    }
  }
}

// Into an f16 recall tier: the dense f32 result rounded to f16, bit for bit, whether read
// through the mapping or with preadv (several batches of planes for large rows), verified or
// not, serial or over a pool, and after its pages were dropped; only the episode's rows are
// written.
TEST(MemoryRehydrate, F16TargetIsDenseRoundedToF16) {
  test::ScratchDir dir;
  ThreadPool pool(3);
  std::vector<StoreCase> cases(std::begin(kStoreCases), std::end(kStoreCases));
  cases.push_back({"wide_rows_f16", RopeStyle::neox, 8, 128, 128, SlabType::f16});
  for (const StoreCase& sc : cases) {
    const RotaryDims r = RotaryDims::make(sc.style, sc.n_heads, sc.head_dim, sc.n_rot, 1e6);
    const RotationTable table(r);
    const uint32_t L = 3, D = r.row_dim();
    StoreGeometry g;
    g.num_layers = L;
    g.hidden_size = 16;
    g.kv_dim = D;
    g.max_episodes = 4;
    g.max_tokens = 40;
    g.slab_type = sc.slab;
    StoreOptions o = test::not_durable();
    EpisodicStore store = EpisodicStore::create(dir.file(std::string(sc.name) + "16.mem"), g, 1, o);
    for (size_t n : {1u, 7u, 40u}) {
      const test::SyntheticEpisode ep(store.layout(), n, n);
      const uint64_t id = store.append(ep.record(1000));
      for (double delta : {0.0, -977.0, 5e5}) {
        std::vector<float> k(L * n * D), v(k.size());
        DenseKvRows dense(k.data(), v.data(), L, n, D, r.head_dim);
        RehydrateOptions dro;
        dro.tables = {&table, 1};
        store.rehydrate(id, {&r, 1}, delta, dense.target(), dro);
        const uint32_t first = 3, rows = 45;    // the tier holds 45 rows; the episode from row 3
        for (int mode = 0; mode < 7; ++mode) {  // 6: after evict_pages (cold where it can be)
          std::vector<std::vector<uint16_t>> tk(L, std::vector<uint16_t>(rows * D, 0x7bad));
          std::vector<std::vector<uint16_t>> tv = tk;
          std::vector<uint16_t*> kp, vp;
          for (uint32_t l = 0; l < L; ++l) {
            kp.push_back(tk[l].data() + first * D);
            vp.push_back(tv[l].data() + first * D);
          }
          RehydrateOptions ro;
          ro.tables = {&table, 1};
          ro.verify = mode <= 1 || mode == 3;
          ro.always_pread = mode >= 2 && mode < 6;
          if (mode % 2 == 1) ro.pool = &pool;
          if (mode == 6) store.evict_pages(id);
          store.rehydrate(id, {&r, 1}, delta, KvRowsF16{kp, vp, D, rows - first}, ro);
          for (uint32_t l = 0; l < L; ++l)
            for (size_t i = 0; i < rows * D; ++i) {
              const bool inside = i >= first * D && i < (first + n) * D;
              const size_t at = l * n * D + i - first * D;
              ASSERT_EQ(tk[l][i], inside ? fp32_to_fp16(k[at]) : 0x7bad)
                  << sc.name << " n=" << n << " delta=" << delta << " mode " << mode << " l" << l
                  << " i" << i;
              ASSERT_EQ(tv[l][i], inside ? fp32_to_fp16(v[at]) : 0x7bad) << sc.name;
            }
        }
      }
    }
    // Wrong row size or too few rows: refused, nothing written.
    const uint64_t id = store.total_episodes() - 1;
    std::vector<uint16_t> buf(L * 40 * D, 0x7bad);
    std::vector<uint16_t*> kp = {buf.data(), buf.data(), buf.data()};
    EXPECT_THROW(store.rehydrate(id, {&r, 1}, 1.0, KvRowsF16{kp, kp, D + 1, 40}), Error);
    EXPECT_THROW(store.rehydrate(id, {&r, 1}, 1.0, KvRowsF16{kp, kp, D, 39}), Error);
    for (uint16_t x : buf) ASSERT_EQ(x, 0x7bad);
  }
}

TEST(MemoryRehydrate, BadTargetsAreRefused) {
  test::ScratchDir dir;
  const RotaryDims r = RotaryDims::make(RopeStyle::neox, 2, 8, 8, 1e4);
  StoreGeometry g;
  g.num_layers = 2;
  g.hidden_size = 8;
  g.kv_dim = 16;
  g.max_episodes = 2;
  g.max_tokens = 8;
  StoreOptions o = test::not_durable();
  EpisodicStore store = EpisodicStore::create(dir.file("bad.mem"), g, 1, o);
  const test::SyntheticEpisode ep(store.layout(), 1, 5);
  const uint64_t id = store.append(ep.record());
  std::vector<float> k(2 * 5 * 16, kSentinel), v(k.size(), kSentinel);
  std::vector<float*> kp = {k.data(), k.data() + 80}, vp = {v.data(), v.data() + 80};
  KvRowTarget t{kp, vp, 0, 16, 8, 4};  // holds 4 rows, the episode has 5
  EXPECT_THROW(store.rehydrate(id, {&r, 1}, 3.0, t), Error);
  t.max_tokens = 5;
  t.k = std::span<float* const>(kp.data(), 1);  // one layer for two
  EXPECT_THROW(store.rehydrate(id, {&r, 1}, 3.0, t), Error);
  t.k = kp;
  const RotationTable wrong(RotaryDims::make(RopeStyle::neox, 2, 8, 8, 500.0));
  RehydrateOptions ro;
  ro.tables = {&wrong, 1};
  EXPECT_THROW(store.rehydrate(id, {&r, 1}, 3.0, t, ro), Error);
  for (float x : k) EXPECT_EQ(x, kSentinel);  // nothing written
  EXPECT_THROW(store.rehydrate(id + 7, {&r, 1}, 3.0, t), Error);
  store.rehydrate(id, {&r, 1}, 3.0, t);
}

}  // namespace
}  // namespace channel
