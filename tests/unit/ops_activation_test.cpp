// SiLU-GLU and GELU-tanh-GLU: SIMD against the scalar reference at awkward sizes and
// misaligned starts, and the f16-table GELU against the exact function.
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/layer_kernels.h"
#include "ops/activation.h"

namespace channel {
namespace {

constexpr int kSizes[] = {1, 3, 7, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 129, 512};

struct Inputs {
  std::vector<float> gate, up;
};

Inputs make_inputs(int n, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 3.0f);
  Inputs in{std::vector<float>(static_cast<size_t>(n)), std::vector<float>(static_cast<size_t>(n))};
  for (auto& v : in.gate) v = dist(rng);
  for (auto& v : in.up) v = dist(rng);
  if (n > 4) in.gate[0] = -95.0f, in.gate[1] = 95.0f, in.gate[2] = -10.0f, in.gate[3] = 12.0f;
  return in;
}

TEST(SiluGlu, SimdMatchesReference) {
  std::mt19937 rng(11);
  for (int n : kSizes) {
    for (int offset : {0, 1, 5}) {
      const Inputs in = make_inputs(n + offset, rng);
      std::vector<float> want(in.gate.size()), got(in.gate.size());
      silu_glu_ref(in.gate.data() + offset, in.up.data() + offset, n, want.data() + offset);
      silu_glu(in.gate.data() + offset, in.up.data() + offset, n, got.data() + offset);
      for (int i = offset; i < n + offset; ++i) {
        const auto u = static_cast<size_t>(i);
        ASSERT_NEAR(got[u], want[u], 2e-6f * std::abs(want[u]) + 1e-30f)
            << "n " << n << " offset " << offset << " gate " << in.gate[u];
      }
    }
  }
}

TEST(SiluGlu, ReferenceIsTheDefinition) {
  const float g[2] = {0.0f, 2.0f}, u[2] = {5.0f, 3.0f};
  float out[2];
  silu_glu_ref(g, u, 2, out);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_NEAR(out[1], 2.0 / (1.0 + std::exp(-2.0)) * 3.0, 1e-6);
}

TEST(GeluTanhGlu, SimdMatchesReferenceExactly) {
  std::mt19937 rng(13);
  for (int n : kSizes) {
    for (int offset : {0, 1, 5}) {
      const Inputs in = make_inputs(n + offset, rng);
      std::vector<float> want(in.gate.size()), got(in.gate.size());
      gelu_tanh_glu_ref(in.gate.data() + offset, in.up.data() + offset, n, want.data() + offset);
      gelu_tanh_glu(in.gate.data() + offset, in.up.data() + offset, n, got.data() + offset);
      for (int i = offset; i < n + offset; ++i)
        ASSERT_EQ(got[static_cast<size_t>(i)], want[static_cast<size_t>(i)]) << "n " << n;
    }
  }
}

TEST(GeluTanhGlu, TableIsCloseToTheExactFunction) {
  for (float x = -12.0f; x <= 12.0f; x += 0.01f) {
    const float one = 1.0f;
    float got;
    gelu_tanh_glu_ref(&x, &one, 1, &got);
    const double exact =
        0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    ASSERT_NEAR(got, exact, 2e-3 * std::abs(exact) + 1e-4) << "x " << x;
  }
  EXPECT_NEAR(gelu_tanh_exact(1.0f), 0.841192f, 1e-5f);
}

TEST(Softcap, BoundsTheValues) {
  float x[3] = {0.0f, 1000.0f, -3.0f};
  softcap(x, 3, 30.0f);
  EXPECT_EQ(x[0], 0.0f);
  EXPECT_NEAR(x[1], 30.0f, 1e-4f);
  EXPECT_NEAR(x[2], 30.0f * std::tanh(-0.1f), 1e-6f);
}

}  // namespace
}  // namespace channel
