// 10^6 tokens through a tiny bounded layer: the state never grows or moves, and the output
// at the end still equals the naive absolute-RoPE reference at absolute positions ~10^6.
#include <cmath>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "bounded/bounded_attention_core.h"
#include "bounded/bounded_naive.h"
#include "bounded_test_util.h"

namespace channel {
namespace {

// Deterministic pseudo-random value of (position, index), so any slice can be regenerated.
float value_at(uint64_t pos, uint64_t i) {
  uint64_t x = pos * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull + 0x94D049BB133111EBull;
  x ^= x >> 31;
  x *= 0xD6E8FEB86659FD93ull;
  x ^= x >> 32;
  return static_cast<float>(static_cast<double>(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

void fill_rows(std::vector<float>& buf, uint64_t pos0, int64_t n, int row, uint64_t salt) {
  buf.resize(static_cast<size_t>(n) * row);
  for (int64_t p = 0; p < n; ++p) {
    for (int i = 0; i < row; ++i) buf[p * row + i] = value_at(pos0 + p, salt + i);
  }
}

TEST(BoundedStateSlow, FixedSizeOverAMillionTokens) {
  const test::BoundedGeom g{2, 1, 8, 4, 4, 1, 10000.0};
  BoundedRopeCache cache;
  auto rope = cache.get(g.window, g.rope_dims, g.base);
  const BoundedAttnCfg cfg = test::make_cfg(g, rope.get());
  const int qrow = g.n_heads * g.head_dim, kvrow = g.n_kv_heads * g.head_dim;
  std::vector<float> sk, sv;
  fill_rows(sk, 0, g.n_sinks, kvrow, 1000);
  fill_rows(sv, 0, g.n_sinks, kvrow, 2000);

  BoundedState st(g.n_kv_heads, g.window, g.head_dim);
  const size_t bytes0 = st.bytes();
  const float* ring_k0 = st.ring_k().data();
  const float* ring_v0 = st.ring_v().data();
  const uint64_t T = 1000000;
  std::vector<float> q, k, v, out;
  uint64_t t = 0;
  for (int step = 0; t < T; ++step) {
    const int64_t n = std::min<uint64_t>(step % 2 ? 37 : 1, T - t);  // decode and chunks
    fill_rows(q, t, n, qrow, 0);
    fill_rows(k, t, n, kvrow, 100);
    fill_rows(v, t, n, kvrow, 200);
    out.resize(static_cast<size_t>(n) * qrow);
    bounded_attend(cfg, sk.data(), sv.data(), st, q.data(), k.data(), v.data(), n, out.data());
    t += n;
    ASSERT_EQ(st.bytes(), bytes0);
    ASSERT_EQ(st.ring_k().data(), ring_k0);
    ASSERT_EQ(st.ring_v().data(), ring_v0);
  }
  EXPECT_EQ(st.seen(), T);
  EXPECT_EQ(st.len(), g.window);

  // The last output depends only on the last W positions: the reference over that slice,
  // at its true absolute positions, must agree.
  const int64_t n = g.window;
  const uint64_t pos0 = T - n;
  fill_rows(q, pos0, n, qrow, 0);
  fill_rows(k, pos0, n, kvrow, 100);
  fill_rows(v, pos0, n, kvrow, 200);
  std::vector<float> ref(static_cast<size_t>(n) * qrow);
  bounded_attention_naive(cfg, g.base, sk.data(), sv.data(), q.data(), k.data(), v.data(), n, pos0,
                          ref.data());
  const float* last = out.data() + out.size() - qrow;
  test::expect_rows_close(last, ref.data() + ref.size() - qrow, g.n_heads, g.head_dim, 1e-5,
                          "last position");
}

}  // namespace
}  // namespace channel
