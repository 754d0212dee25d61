// RoPE: the two pairing layouts, the angle recurrence, and that a rotation keeps norms and
// makes q.k depend only on the position difference.
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "ops/rope.h"
#include "util/error.h"

namespace channel {
namespace {

std::vector<float> rotated(const RopeParams& p, int32_t pos, std::vector<float> x, int n_heads,
                           int head_dim) {
  std::vector<float> cs(static_cast<size_t>(p.n_rot));
  rope_angles(p, pos, cs.data());
  rope_apply(p, cs.data(), x.data(), n_heads, head_dim);
  return x;
}

TEST(Rope, AnglesFollowTheBasePowers) {
  const RopeParams p{RopeStyle::normal, 8, 10000.0f, 1.0f, nullptr};
  std::vector<float> cs(8);
  rope_angles(p, 3, cs.data());
  for (int i = 0; i < 4; ++i) {
    const double angle = 3.0 * std::pow(10000.0, -2.0 * i / 8.0);
    EXPECT_NEAR(cs[static_cast<size_t>(2 * i)], std::cos(angle), 1e-5);
    EXPECT_NEAR(cs[static_cast<size_t>(2 * i + 1)], std::sin(angle), 1e-5);
  }
}

TEST(Rope, LinearScalingDividesThePosition) {
  const RopeParams scaled{RopeStyle::neox, 16, 1e6f, 0.125f, nullptr};
  const RopeParams plain{RopeStyle::neox, 16, 1e6f, 1.0f, nullptr};
  std::vector<float> a(16), b(16);
  rope_angles(scaled, 80, a.data());
  rope_angles(plain, 10, b.data());
  for (size_t i = 0; i < 16; ++i) EXPECT_NEAR(a[i], b[i], 1e-5);
}

TEST(Rope, NormalPairsNeighboursNeoxPairsHalves) {
  // Only dimension 0 is set; pair 0 has angle = pos for both layouts.
  std::vector<float> x(8, 0.0f);
  x[0] = 1.0f;
  const float c = std::cos(1.0f), s = std::sin(1.0f);
  const auto normal = rotated({RopeStyle::normal, 8, 10000.0f, 1.0f, nullptr}, 1, x, 1, 8);
  EXPECT_NEAR(normal[0], c, 1e-6);
  EXPECT_NEAR(normal[1], s, 1e-6);
  EXPECT_EQ(normal[4], 0.0f);
  const auto neox = rotated({RopeStyle::neox, 8, 10000.0f, 1.0f, nullptr}, 1, x, 1, 8);
  EXPECT_NEAR(neox[0], c, 1e-6);
  EXPECT_EQ(neox[1], 0.0f);
  EXPECT_NEAR(neox[4], s, 1e-6);
}

TEST(Rope, PartialRotationLeavesTheTailAlone) {
  std::vector<float> x(12);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) + 1.0f;
  const auto y = rotated({RopeStyle::neox, 8, 10000.0f, 1.0f, nullptr}, 5, x, 1, 12);
  for (size_t i = 8; i < 12; ++i) EXPECT_EQ(y[i], x[i]);
}

TEST(Rope, DotProductDependsOnlyOnDistance) {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist;
  for (RopeStyle style : {RopeStyle::normal, RopeStyle::neox}) {
    const RopeParams p{style, 32, 10000.0f, 1.0f, nullptr};
    std::vector<float> q(64), k(64);  // 2 heads of 32
    for (auto& v : q) v = dist(rng);
    for (auto& v : k) v = dist(rng);
    auto dot = [](const std::vector<float>& a, const std::vector<float>& b) {
      double s = 0;
      for (size_t i = 0; i < 32; ++i) s += static_cast<double>(a[i]) * b[i];
      return s;
    };
    const double d1 = dot(rotated(p, 10, q, 2, 32), rotated(p, 7, k, 2, 32));
    const double d2 = dot(rotated(p, 103, q, 2, 32), rotated(p, 100, k, 2, 32));
    EXPECT_NEAR(d1, d2, 1e-3);
    double n0 = 0, n1 = 0;
    const auto r = rotated(p, 1234, q, 2, 32);
    for (size_t i = 0; i < 64; ++i) n0 += q[i] * q[i], n1 += r[i] * r[i];
    EXPECT_NEAR(n0, n1, 1e-3);
  }
}

TEST(Rope, InverseFrequenciesAreTheBasePowersInF64) {
  const float factors[4] = {1.0f, 2.0f, 4.0f, 8.0f};
  const std::vector<double> f = rope_inv_freq(8, 500000.0, 0.25, factors);
  ASSERT_EQ(f.size(), 4u);
  for (uint32_t i = 0; i < 4; ++i)
    EXPECT_EQ(f[i], 0.25 * std::pow(500000.0, -2.0 * i / 8) / factors[i]) << i;
  EXPECT_TRUE(rope_inv_freq(0, 10000.0).empty());
  EXPECT_THROW(RopeFreqs::make(RopeStyle::neox, 7, 10000.0), Error);
  EXPECT_THROW(RopeFreqs::make(RopeStyle::neox, 8, 0.0), Error);
}

// The f32 and f64 angle paths feed one rotation: given the same cos/sin, the forward pass's
// in-place form and the f64 out-of-place form give the same bits, tail dims copied.
TEST(Rope, OneRotationForBothAnglePaths) {
  std::mt19937 rng(5);
  std::normal_distribution<float> dist;
  for (RopeStyle style : {RopeStyle::normal, RopeStyle::neox}) {
    const RopeParams p{style, 16, 10000.0f, 1.0f, nullptr};
    const RopeFreqs f = RopeFreqs::make(style, 16, 10000.0);
    std::vector<float> x(3 * 24);
    for (auto& v : x) v = dist(rng);
    std::vector<float> cs(16);
    rope_cos_sin(f, 77.0, cs.data());
    std::vector<float> a = x, b(x.size());
    rope_apply(p, cs.data(), a.data(), 3, 24);
    rope_rotate(f, cs.data(), x.data(), b.data(), 3, 24);
    EXPECT_EQ(a, b);
    rope_rotate_at(f, 77.0, x.data(), b.data(), 3, 24);
    EXPECT_EQ(a, b);
    for (size_t i = 0; i < 8; ++i) {
      const double angle = 77.0 * f.inv_freq[i];
      EXPECT_EQ(cs[2 * i], static_cast<float>(std::cos(angle)));
      EXPECT_EQ(cs[2 * i + 1], static_cast<float>(std::sin(angle)));
    }
  }
}

}  // namespace
}  // namespace channel
