// The centroid sketch (centroid_sketch.h) and the exact top-k built on it: every int8 dot
// kernel against its scalar reference at awkward sizes and misaligned starts, the per-row
// bound against the exact FP16 cosine, and EpisodicStore::query against a brute-force FP16
// scan written here (identical ids, order and score bits) on random stores, duplicate and
// near-tied centroids, evictions, pinned slots, appends between queries, k beyond the live
// count, zero and non-finite queries and centroids.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/thread_pool.h"
#include "memory/centroid_sketch.h"
#include "memory/memory_kernels.h"
#include "memory_test_util.h"
#include "ops/fp16.h"

namespace channel {
namespace {

using test::ScratchDir;

constexpr size_t kDims[] = {1, 3, 7, 15, 16, 17, 31, 33, 63, 64, 65, 127, 128, 129, 1000, 3840};

TEST(MemorySketch, Int8DotsMatchReference) {
  const Int8DotsVariant* variants = nullptr;
  const size_t n_variants = int8_dots_variants(&variants);
  ASSERT_GE(n_variants, 1u);
  EXPECT_STREQ(variants[n_variants - 1].isa, "scalar");
  std::mt19937 rng(1);
  std::uniform_int_distribution<int> row_value(-128, 127), q_value(-127, 127);
  for (size_t off : {0, 1, 3, 7}) {  // misaligned row and query starts
    for (size_t dim : kDims) {
      const size_t n_rows = 5, stride = off + dim + 9;
      std::vector<int8_t> rows(stride * n_rows + 64), q(dim + 8);
      for (auto& x : rows) x = static_cast<int8_t>(row_value(rng));
      for (auto& x : q) x = static_cast<int8_t>(q_value(rng));
      std::vector<int32_t> ref(n_rows), got(n_rows);
      int8_dots_ref(rows.data() + off, stride, n_rows, q.data() + off, dim, ref.data());
      for (size_t v = 0; v < n_variants; ++v) {
        std::fill(got.begin(), got.end(), -1);
        variants[v].fn(rows.data() + off, stride, n_rows, q.data() + off, dim, got.data());
        ASSERT_EQ(got, ref) << variants[v].isa << " dim=" << dim << " off=" << off;
      }
      int8_dots(rows.data() + off, stride, n_rows, q.data() + off, dim, got.data());
      ASSERT_EQ(got, ref) << "dispatched, dim=" << dim;
    }
  }
}

TEST(MemorySketch, Int8DotsExtremesDoNotOverflow) {
  const Int8DotsVariant* variants = nullptr;
  const size_t n_variants = int8_dots_variants(&variants);
  const size_t dim = kInt8DotsMaxDim;
  std::vector<int8_t> rows(2 * dim), q(dim);
  std::fill(rows.begin(), rows.begin() + dim, static_cast<int8_t>(-128));
  std::fill(rows.begin() + dim, rows.end(), static_cast<int8_t>(127));
  for (int sign : {1, -1}) {
    std::fill(q.begin(), q.end(), static_cast<int8_t>(127 * sign));
    const int32_t expect[2] = {static_cast<int32_t>(-128 * 127 * sign * int64_t{dim}),
                               static_cast<int32_t>(127 * 127 * sign * int64_t{dim})};
    for (size_t v = 0; v < n_variants; ++v) {
      int32_t got[2] = {0, 0};
      variants[v].fn(rows.data(), dim, 2, q.data(), dim, got);
      EXPECT_EQ(got[0], expect[0]) << variants[v].isa;
      EXPECT_EQ(got[1], expect[1]) << variants[v].isa;
    }
  }
}

// The cosine the exact scan computes for one f16 row (the store's formula).
float exact_cosine(const std::vector<uint16_t>& c, const std::vector<float>& q) {
  float dot = 0.0f, norm2 = 0.0f;
  centroid_dots(reinterpret_cast<const uint8_t*>(c.data()), 0, 1, q.data(), q.size(), &dot, &norm2);
  double qn = 0.0;
  for (float x : q) qn += static_cast<double>(x) * x;
  const float denom = static_cast<float>(std::sqrt(qn)) * std::sqrt(norm2);
  return denom > 0.0f ? dot / denom : 0.0f;
}

std::vector<uint16_t> to_f16(const std::vector<float>& x) {
  std::vector<uint16_t> h(x.size());
  for (size_t i = 0; i < x.size(); ++i) h[i] = fp32_to_fp16(x[i]);
  return h;
}

TEST(MemorySketch, UpperBoundHoldsAndIsUseful) {
  std::mt19937 rng(2);
  std::normal_distribution<float> nd;
  for (size_t dim : kDims) {
    const size_t n_rows = 12;
    CentroidSketch sketch(n_rows, dim);
    std::vector<std::vector<uint16_t>> rows;
    for (size_t r = 0; r < n_rows; ++r) {
      std::vector<float> x(dim);
      for (auto& v : x) v = nd(rng);
      if (r == 1) std::fill(x.begin(), x.end(), 0.0f);  // zero row: exact cosine 0
      if (r == 2) x[dim / 2] = 900.0f;                  // one spike dominates the scale
      if (r == 3)
        for (auto& v : x) v *= 1e-6f;  // f16 subnormals
      if (r == 4)
        for (auto& v : x) v = v > 0 ? 65504.0f : -65504.0f;  // the largest f16
      rows.push_back(to_f16(x));
      sketch.quantize_into(r, rows.back().data());
    }
    for (int trial = 0; trial < 4; ++trial) {
      std::vector<float> q(dim);
      for (auto& v : q) v = nd(rng) * (trial == 3 ? 1e-12f : 1.0f);
      if (trial == 1) q[0] = 1e4f;  // a spiky query
      if (trial == 2)
        q = [&] {  // the query is one of the rows: cosine ~1
          std::vector<float> c(dim);
          for (size_t i = 0; i < dim; ++i) c[i] = fp16_to_fp32(rows[0][i]);
          return c;
        }();
      const auto sq = quantize_query(q);
      ASSERT_TRUE(sq.has_value());
      std::vector<double> upper(n_rows);
      sketch.upper_bounds(*sq, 0, n_rows, upper.data());
      for (size_t r = 0; r < n_rows; ++r) {
        const float e = exact_cosine(rows[r], q);
        ASSERT_GE(upper[r], static_cast<double>(e)) << "dim=" << dim << " row=" << r;
        if (r == 1) {
          EXPECT_EQ(upper[r], 0.0);
        }
        if (dim >= 64) {  // not vacuous: a few int8 steps above the exact value
          EXPECT_LT(upper[r] - e, 0.15) << "dim=" << dim << " row=" << r;
        }
      }
    }
  }
}

TEST(MemorySketch, RowsWithoutABoundAndQueriesWithout) {
  CentroidSketch sketch(2, 17);
  std::vector<float> x(17, 0.5f);
  x[3] = std::numeric_limits<float>::infinity();
  sketch.quantize_into(0, to_f16(x).data());
  x[3] = std::numeric_limits<float>::quiet_NaN();
  sketch.quantize_into(1, to_f16(x).data());
  EXPECT_FALSE(sketch.info(0).bounded);
  EXPECT_FALSE(sketch.info(1).bounded);
  std::vector<float> q(17, 1.0f);
  std::vector<double> upper(2);
  sketch.upper_bounds(*quantize_query(q), 0, 2, upper.data());
  EXPECT_EQ(upper[0], std::numeric_limits<double>::infinity());
  EXPECT_EQ(upper[1], std::numeric_limits<double>::infinity());
  // Queries the bound does not cover: the store scans FP16 for them.
  EXPECT_FALSE(quantize_query(std::vector<float>(17, 0.0f)).has_value());
  EXPECT_FALSE(quantize_query(std::vector<float>(17, 1e-25f)).has_value());
  EXPECT_FALSE(quantize_query(std::vector<float>(17, 1e31f)).has_value());
  q[5] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(quantize_query(q).has_value());
  q[5] = -std::numeric_limits<float>::infinity();
  EXPECT_FALSE(quantize_query(q).has_value());
  EXPECT_FALSE(quantize_query(std::vector<float>(kInt8DotsMaxDim + 1, 1.0f)).has_value());
}

// --- EpisodicStore::query against brute force -------------------------------------------------

StoreGeometry geometry(uint32_t hidden, uint32_t max_episodes) {
  StoreGeometry g;
  g.num_layers = 1;
  g.hidden_size = hidden;
  g.kv_dim = 8;
  g.max_episodes = max_episodes;
  g.max_tokens = 1;
  return g;
}

StoreOptions fast() {
  StoreOptions o = test::not_durable();
  return o;
}

uint64_t append(EpisodicStore& s, const std::vector<float>& centroid) {
  const std::vector<int32_t> tokens = {7};
  const std::vector<float> kv(16, 0.5f);
  EpisodeRecord r;
  r.tokens = tokens;
  r.centroid = centroid;
  r.kv = kv;
  return s.append(r);
}

// The brute-force answer: every live episode's stored f16 centroid through the FP16 kernel,
// the store's cosine formula, sorted best first (NaN last, ties by lower id).
std::vector<RecallHit> brute_force(const EpisodicStore& s, const std::vector<float>& q, size_t k) {
  std::vector<RecallHit> all;
  for (const EpisodeHeader& h : s.list()) {
    const Episode e = s.read(h.episode_id);
    all.push_back({h.episode_id, e.slot, exact_cosine(to_f16(e.centroid), q)});
  }
  std::sort(all.begin(), all.end(), [](const RecallHit& a, const RecallHit& b) {
    if (std::isnan(a.score) != std::isnan(b.score)) return std::isnan(b.score);
    if (!std::isnan(a.score) && a.score != b.score) return a.score > b.score;
    return a.episode_id < b.episode_id;
  });
  all.resize(std::min(k, all.size()));
  return all;
}

void expect_same(const std::vector<RecallHit>& got, const std::vector<RecallHit>& want,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].episode_id, want[i].episode_id) << what << " rank " << i;
    EXPECT_EQ(got[i].slot, want[i].slot) << what << " rank " << i;
    uint32_t a, b;  // the same bits (NaN included)
    std::memcpy(&a, &got[i].score, 4);
    std::memcpy(&b, &want[i].score, 4);
    EXPECT_EQ(a, b) << what << " rank " << i << ": " << got[i].score << " vs " << want[i].score;
  }
}

// Checks query() (twice: a store's first query only scans, the second builds the sketch, later
// ones use it), with and without a pool, and query_full_scan() against brute force.
void check_queries(const EpisodicStore& s, const std::vector<std::vector<float>>& queries,
                   std::initializer_list<size_t> ks, ThreadPool& pool, const std::string& what) {
  for (size_t qi = 0; qi < queries.size(); ++qi) {
    for (size_t k : ks) {
      const auto want = brute_force(s, queries[qi], k);
      const std::string w = what + " q" + std::to_string(qi) + " k" + std::to_string(k);
      expect_same(s.query(queries[qi], k), want, w + " (1 thread)");
      expect_same(s.query(queries[qi], k, &pool), want, w + " (pool)");
      expect_same(s.query_full_scan(queries[qi], k, &pool), want, w + " (full scan)");
    }
  }
}

std::vector<float> gaussian(std::mt19937& rng, size_t n, float sigma = 1.0f) {
  std::normal_distribution<float> nd(0.0f, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

TEST(MemorySketchQuery, RandomStoresMatchBruteForce) {
  ThreadPool pool(3);
  std::mt19937 rng(3);
  for (uint32_t hidden : {1u, 17u, 67u, 256u}) {
    ScratchDir dir;
    EpisodicStore s = EpisodicStore::create(dir.file("r.mem"), geometry(hidden, 200), 1, fast());
    std::vector<std::vector<float>> cents;
    for (int i = 0; i < 150; ++i) {
      cents.push_back(gaussian(rng, hidden));
      append(s, cents.back());
    }
    std::vector<std::vector<float>> queries = {gaussian(rng, hidden), gaussian(rng, hidden),
                                               cents[17], cents[149]};
    check_queries(s, queries, {1, 3, 8, 40, 150, 1000}, pool, "hidden " + std::to_string(hidden));
    if (hidden > 1) {  // with one dimension every centroid has cosine +-1
      EXPECT_EQ(s.query(cents[17], 1)[0].episode_id, 17u);
    }
    EXPECT_TRUE(s.query(queries[0], 0).empty());
  }
}

TEST(MemorySketchQuery, DuplicateAndNearTiedCentroids) {
  ThreadPool pool(2);
  std::mt19937 rng(4);
  const uint32_t hidden = 130;
  ScratchDir dir;
  EpisodicStore s = EpisodicStore::create(dir.file("t.mem"), geometry(hidden, 120), 1, fast());
  const std::vector<float> base = gaussian(rng, hidden);
  std::uniform_int_distribution<int> coin(0, 3);
  for (int i = 0; i < 100; ++i) {
    std::vector<float> c = base;
    if (i % 5 == 0) {
      // exact duplicates of base: tied scores, ranked by id
    } else if (i % 5 == 1) {
      for (auto& x : c) x *= 2.0f;  // the same direction, another norm
    } else {
      // One f16 ulp up or down in a few dimensions: cosines that differ below the int8 step.
      for (auto& x : c) {
        uint16_t h = fp32_to_fp16(x);
        const int d = coin(rng);
        if (d == 1) h = static_cast<uint16_t>(h + 1);
        if (d == 2 && (h & 0x7FFF) != 0) h = static_cast<uint16_t>(h - 1);
        x = fp16_to_fp32(h);
      }
    }
    append(s, c);
  }
  for (int i = 0; i < 10; ++i) append(s, gaussian(rng, hidden));  // unrelated ones
  std::vector<float> near = base;
  near[0] += 0.01f;
  std::vector<float> neg = base;
  for (auto& x : neg) x = -x;
  check_queries(s, {base, near, neg, gaussian(rng, hidden)}, {1, 5, 21, 64, 200}, pool, "ties");
}

TEST(MemorySketchQuery, EvictionsPinsAndAppendsBetweenQueries) {
  ThreadPool pool(2);
  std::mt19937 rng(5);
  const uint32_t hidden = 96;
  ScratchDir dir;
  EpisodicStore s = EpisodicStore::create(dir.file("e.mem"), geometry(hidden, 40), 1, fast());
  std::vector<std::vector<float>> queries;
  for (int i = 0; i < 3; ++i) queries.push_back(gaussian(rng, hidden));
  // Empty store, then fewer live episodes than k.
  EXPECT_TRUE(s.query(queries[0], 5).empty());
  for (int i = 0; i < 3; ++i) append(s, gaussian(rng, hidden));
  check_queries(s, queries, {1, 5}, pool, "3 live");  // builds the sketch
  // Appends after the sketch exists: wrap around the 40 slots twice, pinning a few on the way
  // (the write head skips them), querying between appends.
  for (int i = 3; i < 100; ++i) {
    // Every 7th centroid is close to query 1, so the top changes as episodes come and go.
    std::vector<float> c = gaussian(rng, hidden);
    if (i % 7 == 0) {
      for (size_t d = 0; d < hidden; ++d) c[d] = queries[1][d] + 0.3f * c[d];
    }
    append(s, c);
    if (i == 10 || i == 50) s.set_pinned(static_cast<uint64_t>(i), true);
    if (i % 9 == 0) check_queries(s, queries, {1, 4}, pool, "after " + std::to_string(i));
  }
  EXPECT_TRUE(s.find(10).has_value());  // pinned: survived the wrap
  EXPECT_FALSE(s.find(11).has_value());
  check_queries(s, queries, {1, 8, 39, 40, 41}, pool, "wrapped");
  // A reopened store builds its sketch from the file.
  const std::string path = s.path();
  s = EpisodicStore::open(path, [] {
    StoreOptions o = fast();
    o.read_only = true;
    return o;
  }());
  check_queries(s, queries, {1, 8, 100}, pool, "reopened");
}

TEST(MemorySketchQuery, DegenerateQueriesAndCentroids) {
  ThreadPool pool(2);
  std::mt19937 rng(6);
  const uint32_t hidden = 33;
  ScratchDir dir;
  EpisodicStore s = EpisodicStore::create(dir.file("d.mem"), geometry(hidden, 30), 1, fast());
  for (int i = 0; i < 20; ++i) append(s, gaussian(rng, hidden));
  append(s, std::vector<float>(hidden, 0.0f));   // zero centroid
  append(s, std::vector<float>(hidden, 1e-7f));  // f16 subnormals
  append(s, std::vector<float>(hidden, 1e6f));   // f16 overflow: inf, NaN cosine
  std::vector<float> spike(hidden, 0.0f);
  spike[4] = 3.0f;
  append(s, spike);
  std::vector<float> half_inf = gaussian(rng, hidden);
  half_inf[2] = -1e6f;  // one -inf in f16
  append(s, half_inf);
  const std::vector<std::vector<float>> queries = {
      std::vector<float>(hidden, 0.0f),    // zero query: every score 0, ranked by id
      std::vector<float>(hidden, 1e-30f),  // too small for the bound: the f16 scan answers
      spike, gaussian(rng, hidden), gaussian(rng, hidden, 1e20f)};
  check_queries(s, queries, {1, 3, 24, 25, 26, 60}, pool, "degenerate");
  const auto zero = s.query(queries[0], 3);
  ASSERT_EQ(zero.size(), 3u);
  EXPECT_EQ(zero[0].episode_id, 0u);
  EXPECT_EQ(zero[2].episode_id, 2u);
  EXPECT_EQ(zero[0].score, 0.0f);
  EXPECT_EQ(s.query(spike, 1)[0].episode_id, 23u);
}

// A query racing appends: every answer is one the store could give at some moment, so each hit
// is checked against its episode's exact score and the order; the final answer is exact.
TEST(MemorySketchQuery, QueriesRunDuringAppends) {
  std::mt19937 rng(7);
  const uint32_t hidden = 64;
  ScratchDir dir;
  EpisodicStore s = EpisodicStore::create(dir.file("c.mem"), geometry(hidden, 50), 1, fast());
  for (int i = 0; i < 10; ++i) append(s, gaussian(rng, hidden));
  const std::vector<float> q = gaussian(rng, hidden);
  std::vector<std::vector<float>> cents;
  for (int i = 0; i < 120; ++i) cents.push_back(gaussian(rng, hidden));
  std::thread writer([&] {
    for (const auto& c : cents) append(s, c);
  });
  for (int i = 0; i < 200; ++i) {
    const auto hits = s.query(q, 4);
    for (size_t j = 1; j < hits.size(); ++j) EXPECT_GE(hits[j - 1].score, hits[j].score);
  }
  writer.join();
  ThreadPool pool(2);
  check_queries(s, {q}, {1, 4, 50}, pool, "after the race");
}

}  // namespace
}  // namespace channel
