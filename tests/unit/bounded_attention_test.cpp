// The weight-level bounded operator: against matmul_ref + naive reference, chunked prefill
// (chunk matmuls) vs decode, chunk-invariant attention, thread-count independence, weight
// shape checks.
#include <cmath>
#include <cstring>
#include <random>

#include <gtest/gtest.h>

#include "bounded/bounded_attention.h"
#include "bounded/bounded_naive.h"
#include "bounded_test_util.h"
#include "backend/cpu/matmul.h"
#include "ops/quant.h"
#include "util/error.h"

namespace channel {
namespace {

using test::BoundedGeom;
constexpr int kEmbd = 64;

// Owns the bytes of one weight matrix.
struct OwnedMatrix {
  std::vector<uint8_t> bytes;
  WeightMatrix m{};
};

OwnedMatrix make_matrix(int64_t rows, int64_t cols, GgmlType type, std::mt19937& rng) {
  const std::vector<float> f = test::random_vec(rows * cols, rng, 0.2f);
  OwnedMatrix o;
  if (type == GgmlType::Q8_0 && cols % kQK == 0) {
    const size_t row_bytes = cols / kQK * sizeof(BlockQ8_0);
    o.bytes.resize(rows * row_bytes);
    for (int64_t r = 0; r < rows; ++r) {
      quantize_row_q8_0_ref(f.data() + r * cols, o.bytes.data() + r * row_bytes, cols);
    }
    o.m = {GgmlType::Q8_0, rows, cols, o.bytes.data(), row_bytes};
  } else {
    o.bytes.resize(f.size() * sizeof(float));
    std::memcpy(o.bytes.data(), f.data(), o.bytes.size());
    o.m = {GgmlType::F32, rows, cols, o.bytes.data(), cols * sizeof(float)};
  }
  return o;
}

struct Layer {
  OwnedMatrix wq, wk, wv, wo;
  std::vector<float> q_norm, k_norm, sink_k, sink_v;
  BoundedWeights w;
};

Layer make_layer(const BoundedGeom& g, GgmlType type, uint32_t seed) {
  std::mt19937 rng(seed);
  Layer l;
  const int64_t q_dim = g.n_heads * g.head_dim, kv_dim = g.n_kv_heads * g.head_dim;
  l.wq = make_matrix(q_dim, kEmbd, type, rng);
  l.wk = make_matrix(kv_dim, kEmbd, type, rng);
  l.wv = make_matrix(kv_dim, kEmbd, type, rng);
  l.wo = make_matrix(kEmbd, q_dim, type, rng);
  l.q_norm = test::random_vec(g.head_dim, rng, 0.3f);
  l.k_norm = test::random_vec(g.head_dim, rng, 0.3f);
  for (float& x : l.q_norm) x += 1.0f;
  for (float& x : l.k_norm) x += 1.0f;
  l.sink_k = test::random_vec(size_t{1} * g.n_kv_heads * g.n_sinks * g.head_dim, rng);
  l.sink_v = test::random_vec(l.sink_k.size(), rng);
  l.w = {l.wq.m,          l.wk.m,          l.wv.m,          l.wo.m,
         l.q_norm.data(), l.k_norm.data(), l.sink_k.data(), l.sink_v.data()};
  return l;
}

void rms_norm_rows_ref(float* x, int64_t rows, int n, const float* w, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int i = 0; i < n; ++i) ss += static_cast<double>(x[r * n + i]) * x[r * n + i];
    const double scale = 1.0 / std::sqrt(ss / n + eps);
    for (int i = 0; i < n; ++i) x[r * n + i] = static_cast<float>(x[r * n + i] * scale * w[i]);
  }
}

class BoundedOperator : public ::testing::TestWithParam<BoundedGeom> {
 protected:
  void SetUp() override {
    g_ = GetParam();
    rope_ = cache_.get(g_.window, g_.rope_dims, g_.base);
    cfg_ = test::make_cfg(g_, rope_.get());
  }
  BoundedState new_state() const { return BoundedState(g_.n_kv_heads, g_.window, g_.head_dim); }

  // Positions [0, T) in chunks of `chunk` through bounded_attention(_batch).
  void run(const Layer& l, BoundedState& st, const std::vector<float>& x, int64_t T, int64_t chunk,
           std::vector<float>& y, ThreadPool& pool, int max_batch = 64) const {
    BoundedScratch scratch(cfg_, max_batch);
    for (int64_t i = 0; i < T; i += chunk) {
      const int64_t n = std::min(chunk, T - i);
      if (n == 1) {
        bounded_attention(cfg_, l.w, st, x.data() + i * kEmbd, y.data() + i * kEmbd, scratch, pool);
      } else {
        bounded_attention_batch(cfg_, l.w, st, x.data() + i * kEmbd, n, y.data() + i * kEmbd,
                                scratch, pool);
      }
    }
  }

  BoundedGeom g_;
  BoundedRopeCache cache_;
  std::shared_ptr<const BoundedRope> rope_;
  BoundedAttnCfg cfg_;
};

TEST_P(BoundedOperator, MatchesReferenceProjectionsAndNaiveAttention) {
  const Layer l = make_layer(g_, GgmlType::F32, 11);
  const int64_t T = 2 * g_.window + 9;
  std::mt19937 rng(12);
  const std::vector<float> x = test::random_vec(T * kEmbd, rng);
  ThreadPool pool(2);
  BoundedState st = new_state();
  std::vector<float> y(T * kEmbd);
  run(l, st, x, T, 1, y, pool);

  const int q_dim = g_.n_heads * g_.head_dim, kv_dim = g_.n_kv_heads * g_.head_dim;
  std::vector<float> q(T * q_dim), k(T * kv_dim), v(T * kv_dim), attn(T * q_dim), ref(T * kEmbd);
  matmul_ref(l.w.wq, x.data(), T, q.data());
  matmul_ref(l.w.wk, x.data(), T, k.data());
  matmul_ref(l.w.wv, x.data(), T, v.data());
  rms_norm_rows_ref(q.data(), T * g_.n_heads, g_.head_dim, l.q_norm.data(), cfg_.norm_eps);
  rms_norm_rows_ref(k.data(), T * g_.n_kv_heads, g_.head_dim, l.k_norm.data(), cfg_.norm_eps);
  bounded_attention_naive(cfg_, g_.base, l.sink_k.data(), l.sink_v.data(), q.data(), k.data(),
                          v.data(), T, 77777, attn.data());
  matmul_ref(l.w.wo, attn.data(), T, ref.data());
  test::expect_rows_close(y.data(), ref.data(), T, kEmbd, 1e-5, "y");
}

// The matmul kernels compute a row differently for n = 1 (matvec) and n > 1 (GEMM tiles),
// so across chunk sizes the projections — and through them everything — agree only to
// rounding. The attention itself is chunk-invariant: see AttentionIsChunkInvariant below
// and bounded_core_test for bit-identity on given projections.
TEST_P(BoundedOperator, ChunkedPrefillMatchesDecode) {
  // Loose enough for any summation order of the matmul kernels (GEMM vs matvec, q8_0).
  constexpr double kTol = 2e-4;
  for (GgmlType type : {GgmlType::F32, GgmlType::Q8_0}) {
    const Layer l = make_layer(g_, type, 21);
    const int64_t T = 3 * g_.window + 70;
    std::mt19937 rng(22);
    const std::vector<float> x = test::random_vec(T * kEmbd, rng);
    ThreadPool pool(2);
    BoundedState ref_state = new_state();
    std::vector<float> ref(T * kEmbd);
    run(l, ref_state, x, T, 1, ref, pool);
    for (int64_t chunk :
         {int64_t{3}, int64_t{17}, int64_t{64}, int64_t{g_.window}, int64_t{g_.window + 5}, T}) {
      BoundedState st = new_state();
      std::vector<float> y(T * kEmbd);
      run(l, st, x, T, chunk, y, pool, /*max_batch=*/64);
      test::expect_rows_close(y.data(), ref.data(), T, kEmbd, kTol,
                              "chunk " + std::to_string(chunk));
      EXPECT_EQ(st.seen(), ref_state.seen());
      test::expect_rows_close(st.ring_k().data(), ref_state.ring_k().data(),
                              g_.n_kv_heads * g_.window, g_.head_dim, kTol, "ring_k");
      test::expect_rows_close(st.ring_v().data(), ref_state.ring_v().data(),
                              g_.n_kv_heads * g_.window, g_.head_dim, kTol, "ring_v");
    }
  }
}

// With the projections made the same way (one matmul over all T rows), a whole-sequence
// chunk equals position-by-position attention bit for bit, state included.
TEST_P(BoundedOperator, AttentionIsChunkInvariant) {
  const Layer l = make_layer(g_, GgmlType::Q8_0, 41);
  const int64_t T = 2 * g_.window + 13;
  std::mt19937 rng(42);
  const std::vector<float> x = test::random_vec(T * kEmbd, rng);
  ThreadPool pool(2);
  BoundedState chunk_state = new_state();
  std::vector<float> y_chunk(T * kEmbd);
  run(l, chunk_state, x, T, T, y_chunk, pool, /*max_batch=*/static_cast<int>(T));

  // The same steps by hand, attention one position at a time.
  const int q_dim = g_.n_heads * g_.head_dim, kv_dim = g_.n_kv_heads * g_.head_dim;
  std::vector<float> q(T * q_dim), k(T * kv_dim), v(T * kv_dim), attn(T * q_dim), y(T * kEmbd);
  matmul(l.w.wq, x.data(), T, q.data(), pool);
  matmul(l.w.wk, x.data(), T, k.data(), pool);
  matmul(l.w.wv, x.data(), T, v.data(), pool);
  BoundedState st = new_state();
  std::vector<float> qn(q), kn(k);
  for (int64_t r = 0; r < T * g_.n_heads; ++r) {
    // The operator's formula: sum of squares in double, scale in float.
    float* row = qn.data() + r * g_.head_dim;
    double ss = 0;
    for (int i = 0; i < g_.head_dim; ++i) ss += static_cast<double>(row[i] * row[i]);
    const float sc = 1.0f / std::sqrt(static_cast<float>(ss / g_.head_dim) + cfg_.norm_eps);
    for (int i = 0; i < g_.head_dim; ++i) row[i] = (row[i] * sc) * l.q_norm[i];
  }
  for (int64_t r = 0; r < T * g_.n_kv_heads; ++r) {
    float* row = kn.data() + r * g_.head_dim;
    double ss = 0;
    for (int i = 0; i < g_.head_dim; ++i) ss += static_cast<double>(row[i] * row[i]);
    const float sc = 1.0f / std::sqrt(static_cast<float>(ss / g_.head_dim) + cfg_.norm_eps);
    for (int i = 0; i < g_.head_dim; ++i) row[i] = (row[i] * sc) * l.k_norm[i];
  }
  for (int64_t t = 0; t < T; ++t) {
    bounded_attend(cfg_, l.sink_k.data(), l.sink_v.data(), st, qn.data() + t * q_dim,
                   kn.data() + t * kv_dim, v.data() + t * kv_dim, 1, attn.data() + t * q_dim,
                   &pool);
  }
  matmul(l.w.wo, attn.data(), T, y.data(), pool);
  EXPECT_TRUE(test::same_bits(y, y_chunk));
  EXPECT_TRUE(st.bit_equal(chunk_state));
}

TEST_P(BoundedOperator, ResultsDoNotDependOnThreadCount) {
  const Layer l = make_layer(g_, GgmlType::F32, 31);
  const int64_t T = g_.window + 20;
  std::mt19937 rng(32);
  const std::vector<float> x = test::random_vec(T * kEmbd, rng);
  std::vector<float> y1(T * kEmbd), y3(T * kEmbd);
  BoundedState s1 = new_state(), s3 = new_state();
  ThreadPool p1(1), p3(3);
  run(l, s1, x, T, 5, y1, p1);
  run(l, s3, x, T, 5, y3, p3);
  EXPECT_TRUE(test::same_bits(y1, y3));
  EXPECT_TRUE(s1.bit_equal(s3));
}

INSTANTIATE_TEST_SUITE_P(Geoms, BoundedOperator, ::testing::ValuesIn(test::bounded_geoms()),
                         [](const auto& info) { return test::geom_name(info.param); });

TEST(BoundedOperatorWeights, ShapeMismatchIsNamed) {
  const BoundedGeom g{4, 2, 16, 8, 4, 1, 10000.0};
  BoundedRopeCache cache;
  auto rope = cache.get(g.window, g.rope_dims, g.base);
  const BoundedAttnCfg c = test::make_cfg(g, rope.get());
  Layer l = make_layer(g, GgmlType::F32, 1);
  EXPECT_NO_THROW(check_bounded_weights(c, l.w, kEmbd));
  l.w.wk.rows = 16;
  try {
    check_bounded_weights(c, l.w, kEmbd);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("attn_k"), std::string::npos) << e.what();
  }
  l = make_layer(g, GgmlType::F32, 1);
  l.w.sink_k = nullptr;
  EXPECT_THROW(check_bounded_weights(c, l.w, kEmbd), Error);
}

}  // namespace
}  // namespace channel
