// BoundedRope table values, the per-model cache, and bounded config validation.
#include <cmath>

#include <gtest/gtest.h>

#include "bounded/bounded_config.h"
#include "bounded/bounded_rope.h"
#include "ops/rope.h"
#include "util/error.h"

namespace channel {
namespace {

TEST(BoundedRope, TableIsF64AnglesRoundedOnce) {
  for (int W : {1, 3, 17, 4096}) {
    for (int rd : {2, 6, 64, 128}) {
      const double base = 10000.0;
      const auto inv = rope_inv_freq(static_cast<uint32_t>(rd), base);
      ASSERT_EQ(inv.size(), static_cast<size_t>(rd / 2));
      BoundedRope rope(W, inv);
      ASSERT_EQ(rope.window(), W);
      ASSERT_EQ(rope.half(), rd / 2);
      for (int d = 0; d < W; d += std::max(1, W / 37)) {
        for (int i = 0; i < rd / 2; ++i) {
          const double angle = d * std::pow(base, -2.0 * i / rd);
          EXPECT_EQ(rope.cos(d)[i], static_cast<float>(std::cos(angle))) << d << " " << i;
          EXPECT_EQ(rope.sin(d)[i], static_cast<float>(std::sin(angle))) << d << " " << i;
        }
      }
      EXPECT_EQ(rope.cos(0)[0], 1.0f);
      EXPECT_EQ(rope.sin(0)[0], 0.0f);
    }
  }
}

TEST(BoundedRope, ZeroRotaryDimsGivesAnEmptyTable) {
  BoundedRope rope(5, rope_inv_freq(0, 10000.0));
  EXPECT_EQ(rope.half(), 0);
  EXPECT_EQ(rope.window(), 5);
}

TEST(BoundedRope, CacheBuildsEachDistinctTableOnce) {
  BoundedRopeCache cache;
  auto a = cache.get(8, 16, 10000.0);
  auto b = cache.get(8, 16, 10000.0);
  auto c = cache.get(8, 16, 500.0);
  auto d = cache.get(9, 16, 10000.0);
  auto e = cache.get(8, 8, 10000.0);
  EXPECT_EQ(a.get(), b.get());
  EXPECT_NE(a.get(), c.get());
  EXPECT_NE(a.get(), d.get());
  EXPECT_NE(a.get(), e.get());
  EXPECT_EQ(cache.size(), 4u);
}

BoundedAttnCfg good_cfg(const BoundedRope* rope) {
  BoundedAttnCfg c;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 16;
  c.rope_dims = 8;
  c.window = 6;
  c.n_sinks = 2;
  c.attn_scale = 0.25f;
  c.rope = rope;
  return c;
}

TEST(BoundedConfig, ValidationNamesTheBadField) {
  BoundedRopeCache cache;
  auto rope = cache.get(6, 8, 10000.0);
  EXPECT_NO_THROW(validate_bounded_cfg(good_cfg(rope.get()), "layer 0"));
  auto expect_error = [&](BoundedAttnCfg c, const char* needle) {
    try {
      validate_bounded_cfg(c, "blk.3");
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("blk.3"), std::string::npos) << e.what();
    }
  };
  BoundedAttnCfg c = good_cfg(rope.get());
  c.window = 0;
  expect_error(c, "window");
  c = good_cfg(rope.get());
  c.n_sinks = BOUNDED_MAX_SINKS + 1;
  expect_error(c, "sink_count");
  c = good_cfg(rope.get());
  c.rope_dims = 18;
  expect_error(c, "rd = 18");
  c = good_cfg(rope.get());
  c.rope_dims = 7;
  expect_error(c, "rd = 7");
  c = good_cfg(rope.get());
  c.n_kv_heads = 3;
  expect_error(c, "multiple");
  c = good_cfg(nullptr);
  expect_error(c, "rotation table");
  auto other = cache.get(7, 8, 10000.0);
  c = good_cfg(other.get());
  expect_error(c, "rotation table");
}

}  // namespace
}  // namespace channel
