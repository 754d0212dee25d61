// rms_norm (SIMD) against rms_norm_ref at awkward sizes and misaligned starts.
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/layer_kernels.h"
#include "ops/norm.h"

namespace channel {
namespace {

constexpr int kSizes[] = {1, 3, 7, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 1152};

TEST(RmsNorm, SimdMatchesReference) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  for (int n : kSizes) {
    for (int offset : {0, 1, 3}) {
      std::vector<float> x(static_cast<size_t>(n + offset)), w(x.size());
      for (auto& v : x) v = dist(rng);
      for (auto& v : w) v = 1.0f + 0.1f * dist(rng);
      std::vector<float> want(x.size()), got(x.size());
      rms_norm_ref(x.data() + offset, w.data() + offset, n, 1e-6f, want.data() + offset);
      rms_norm(x.data() + offset, w.data() + offset, n, 1e-6f, got.data() + offset);
      for (int i = 0; i < n; ++i)
        ASSERT_NEAR(got[static_cast<size_t>(offset + i)], want[static_cast<size_t>(offset + i)],
                    1e-6f * std::abs(want[static_cast<size_t>(offset + i)]) + 1e-7f)
            << "n " << n << " offset " << offset << " i " << i;
    }
  }
}

TEST(RmsNorm, ReferenceIsTheDefinition) {
  const float x[3] = {1.0f, -2.0f, 2.0f};  // mean of squares 3
  const float w[3] = {1.0f, 2.0f, 0.5f};
  float y[3];
  rms_norm_ref(x, w, 3, 0.0f, y);
  const float s = 1.0f / std::sqrt(3.0f);
  EXPECT_FLOAT_EQ(y[0], s);
  EXPECT_FLOAT_EQ(y[1], -4.0f * s);
  EXPECT_FLOAT_EQ(y[2], s);
}

TEST(RmsNorm, InPlace) {
  std::vector<float> x = {0.5f, 1.5f, -2.5f, 3.0f, 0.25f}, w(5, 1.0f), want(5);
  rms_norm_ref(x.data(), w.data(), 5, 1e-5f, want.data());
  rms_norm(x.data(), w.data(), 5, 1e-5f, x.data());
  for (size_t i = 0; i < 5; ++i) EXPECT_NEAR(x[i], want[i], 1e-6f);
}

}  // namespace
}  // namespace channel
