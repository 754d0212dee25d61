// The bounded attention core (already-projected q/k/v): against the naive absolute-RoPE
// reference, chunked prefill vs token-by-token decode, snapshots, truncate_last, ring math.
#include <algorithm>
#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "bounded/bounded_attention_core.h"
#include "bounded/bounded_naive.h"
#include "bounded/bounded_state.h"
#include "bounded_test_util.h"
#include "util/error.h"

namespace channel {
namespace {

using test::BoundedGeom;

// Random q/k/v/sinks for T positions of one geometry.
struct Inputs {
  std::vector<float> q, k, v;  // [T][nh][hd], [T][kvh][hd], [T][kvh][hd]
  std::vector<float> sk, sv;   // [kvh][S][hd]
  int64_t T;
};

Inputs make_inputs(const BoundedGeom& g, int64_t T, uint32_t seed) {
  std::mt19937 rng(seed);
  Inputs in;
  in.T = T;
  in.q = test::random_vec(static_cast<size_t>(T) * g.n_heads * g.head_dim, rng);
  in.k = test::random_vec(static_cast<size_t>(T) * g.n_kv_heads * g.head_dim, rng);
  in.v = test::random_vec(static_cast<size_t>(T) * g.n_kv_heads * g.head_dim, rng);
  in.sk = test::random_vec(static_cast<size_t>(g.n_kv_heads) * g.n_sinks * g.head_dim, rng, 1.5f);
  in.sv = test::random_vec(static_cast<size_t>(g.n_kv_heads) * g.n_sinks * g.head_dim, rng);
  return in;
}

class BoundedCore : public ::testing::TestWithParam<BoundedGeom> {
 protected:
  void SetUp() override {
    g_ = GetParam();
    rope_ = cache_.get(g_.window, g_.rope_dims, g_.base);
    cfg_ = test::make_cfg(g_, rope_.get());
    validate_bounded_cfg(cfg_, "test");
  }
  BoundedState new_state() const { return BoundedState(g_.n_kv_heads, g_.window, g_.head_dim); }
  size_t q_row() const { return static_cast<size_t>(g_.n_heads) * g_.head_dim; }
  size_t kv_row() const { return static_cast<size_t>(g_.n_kv_heads) * g_.head_dim; }

  // Runs positions [from, to) of `in` through `st` in chunks of `chunk`, writing out rows.
  void run(BoundedState& st, const Inputs& in, int64_t from, int64_t to, int64_t chunk,
           std::vector<float>& out) const {
    for (int64_t i = from; i < to; i += chunk) {
      const int64_t n = std::min(chunk, to - i);
      bounded_attend(cfg_, in.sk.data(), in.sv.data(), st, in.q.data() + i * q_row(),
                     in.k.data() + i * kv_row(), in.v.data() + i * kv_row(), n,
                     out.data() + i * q_row());
    }
  }

  BoundedGeom g_;
  BoundedRopeCache cache_;
  std::shared_ptr<const BoundedRope> rope_;
  BoundedAttnCfg cfg_;
};

TEST_P(BoundedCore, MatchesNaiveAbsoluteRopeReference) {
  const int64_t T = 2 * g_.window + 37;
  const Inputs in = make_inputs(g_, T, 1);
  BoundedState st = new_state();
  std::vector<float> out(T * q_row());
  run(st, in, 0, T, 1, out);
  // The operator has no position; the reference is run at two absolute origins.
  for (uint64_t pos0 : {uint64_t{0}, uint64_t{1234567}}) {
    std::vector<float> ref(T * q_row());
    bounded_attention_naive(cfg_, g_.base, in.sk.data(), in.sv.data(), in.q.data(), in.k.data(),
                            in.v.data(), T, pos0, ref.data());
    test::expect_rows_close(out.data(), ref.data(), T * g_.n_heads, g_.head_dim, 1e-5,
                            "pos0 " + std::to_string(pos0));
  }
}

TEST_P(BoundedCore, ChunkedPrefillIsBitIdenticalToDecode) {
  const int64_t T = 3 * g_.window + 70;
  const Inputs in = make_inputs(g_, T, 2);
  BoundedState ref_state = new_state();
  std::vector<float> ref(T * q_row());
  run(ref_state, in, 0, T, 1, ref);
  for (int64_t chunk : {int64_t{1}, int64_t{3}, int64_t{17}, int64_t{64}, int64_t{g_.window},
                        int64_t{g_.window + 5}, T}) {
    BoundedState st = new_state();
    std::vector<float> out(T * q_row());
    run(st, in, 0, T, chunk, out);
    EXPECT_TRUE(test::same_bits(out, ref)) << "chunk " << chunk;
    EXPECT_TRUE(st.bit_equal(ref_state)) << "chunk " << chunk;
  }
}

TEST_P(BoundedCore, SnapshotRestoreIsBitIdentical) {
  const int64_t T = 2 * g_.window + 20;
  const Inputs in = make_inputs(g_, T + 11, 3);
  BoundedState st = new_state();
  std::vector<float> out1((T + 11) * q_row()), out2((T + 11) * q_row());
  run(st, in, 0, T, 7, out1);
  const BoundedSnapshot snap = st.snapshot();
  const BoundedState before = st;
  run(st, in, T, T + 11, 4, out1);
  EXPECT_FALSE(st.same_ring(before));
  st.restore(snap);
  EXPECT_TRUE(st.bit_equal(before));
  run(st, in, T, T + 11, 1, out2);
  EXPECT_TRUE(std::equal(out1.begin() + T * q_row(), out1.end(), out2.begin() + T * q_row()));
}

TEST_P(BoundedCore, TruncateLastRestoresEveryDepth) {
  // Starting points inside the first window and far past it (wrapped ring, full history).
  for (int64_t start : {int64_t{0}, int64_t{1}, int64_t{g_.window + UNDO_DEPTH + 3}}) {
    const Inputs in = make_inputs(g_, start + UNDO_DEPTH + 8, 4);
    BoundedState base_state = new_state();
    std::vector<float> scratch(in.T * q_row()), cont(in.T * q_row()), cont2(in.T * q_row());
    run(base_state, in, 0, start, 5, scratch);
    BoundedState ref_state = base_state;
    run(ref_state, in, start, start + 8, 1, cont);  // the continuation without speculation
    for (int k = 0; k <= UNDO_DEPTH; ++k) {
      BoundedState st = base_state;
      run(st, in, start, start + k, 3, scratch);
      ASSERT_EQ(st.seen(), static_cast<uint64_t>(start + k));
      st.truncate_last(k);
      EXPECT_TRUE(st.same_ring(base_state)) << "start " << start << " k " << k;
      run(st, in, start, start + 8, 1, cont2);
      EXPECT_TRUE(std::equal(cont.begin() + start * q_row(), cont.begin() + (start + 8) * q_row(),
                             cont2.begin() + start * q_row()))
          << "start " << start << " k " << k;
    }
  }
}

TEST_P(BoundedCore, TruncateBeyondHistoryIsAnErrorAndChangesNothing) {
  const Inputs in = make_inputs(g_, UNDO_DEPTH + 10, 5);
  BoundedState st = new_state();
  std::vector<float> out(in.T * q_row());
  run(st, in, 0, 3, 1, out);
  BoundedState before = st;
  EXPECT_THROW(st.truncate_last(4), Error);  // more than was ever inserted
  EXPECT_THROW(st.truncate_last(-1), Error);
  EXPECT_TRUE(st.bit_equal(before));
  run(st, in, 3, in.T, 2, out);
  before = st;
  EXPECT_EQ(st.undo_available(), UNDO_DEPTH);
  try {
    st.truncate_last(UNDO_DEPTH + 1);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("UNDO_DEPTH"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(st.bit_equal(before));
  st.truncate_last(5);
  EXPECT_EQ(st.undo_available(), UNDO_DEPTH - 5);
  EXPECT_THROW(st.truncate_last(UNDO_DEPTH - 4), Error);  // history already spent
}

INSTANTIATE_TEST_SUITE_P(Geoms, BoundedCore, ::testing::ValuesIn(test::bounded_geoms()),
                         [](const auto& info) { return test::geom_name(info.param); });

TEST(BoundedRing, SlotLenHeadArithmetic) {
  for (int W : {1, 2, 3, 7, 16}) {
    BoundedState st(1, W, 1);
    for (int p = 0; p < 5 * W + 3; ++p) {
      EXPECT_EQ(st.len(), std::min(p, W));
      EXPECT_EQ(st.head(), p % W);
      EXPECT_EQ(bounded_slot_of(static_cast<uint64_t>(p), W), p % W);
      const float x = static_cast<float>(p);
      st.insert(&x, &x);
      // The key of position p lives in slot p mod W.
      EXPECT_EQ(*st.key(0, p % W), x);
    }
  }
  EXPECT_EQ(bounded_slot_of(~uint64_t{0}, 7), static_cast<int64_t>(~uint64_t{0} % 7));
}

TEST(BoundedRing, GeometryMismatchIsAnError) {
  BoundedRopeCache cache;
  auto rope = cache.get(4, 8, 10000.0);
  BoundedAttnCfg c = test::make_cfg({2, 1, 8, 8, 4, 1, 10000.0}, rope.get());
  BoundedState st(1, 5, 8);  // W differs
  std::vector<float> q(16), k(8), v(8), out(16), sk(8), sv(8);
  EXPECT_THROW(
      bounded_attend(c, sk.data(), sv.data(), st, q.data(), k.data(), v.data(), 1, out.data()),
      Error);
  EXPECT_EQ(st.seen(), 0u);
  BoundedState other(1, 4, 8);
  EXPECT_THROW(st.restore(other.snapshot()), Error);
}

}  // namespace
}  // namespace channel
