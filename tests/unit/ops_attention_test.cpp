// Attention over a slot list: the SIMD kernel against the scalar reference at awkward head
// sizes and slot counts, and the reference against plain contiguous softmax attention.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/layer_kernels.h"
#include "ops/attention.h"

namespace channel {
namespace {

TEST(Attention, SimdMatchesReference) {
  std::mt19937 rng(5);
  std::normal_distribution<float> dist;
  for (int head_dim : {1, 3, 7, 8, 15, 16, 17, 31, 32, 33, 64, 65, 256}) {
    for (int n_slots : {1, 2, 7, 33, 100}) {
      const int capacity = n_slots + 5;
      std::vector<float> k(static_cast<size_t>(capacity * head_dim) + 1);  // +1: misaligned start
      std::vector<float> v(k.size()), q(static_cast<size_t>(head_dim));
      for (auto& x : k) x = dist(rng);
      for (auto& x : v) x = dist(rng);
      for (auto& x : q) x = dist(rng);
      // A scattered slot list, as a ring would give.
      std::vector<int32_t> slots(static_cast<size_t>(capacity));
      std::iota(slots.begin(), slots.end(), 0);
      std::shuffle(slots.begin(), slots.end(), rng);
      slots.resize(static_cast<size_t>(n_slots));
      const AttentionHead head{k.data() + 1, v.data() + 1, head_dim, head_dim};
      std::vector<float> scores(slots.size()), want(q.size()), got(q.size());
      const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
      attend_ref(q.data(), head, slots, scale, scores.data(), want.data());
      attend(q.data(), head, slots, scale, scores.data(), got.data());
      for (size_t d = 0; d < q.size(); ++d)
        ASSERT_NEAR(got[d], want[d], 1e-5f) << "head_dim " << head_dim << " slots " << n_slots;
    }
  }
}

TEST(Attention, ReferenceEqualsContiguousSoftmaxAttention) {
  std::mt19937 rng(9);
  std::normal_distribution<float> dist;
  const int head_dim = 8, n = 6;
  std::vector<float> k(n * head_dim), v(n * head_dim), q(head_dim);
  for (auto& x : k) x = dist(rng);
  for (auto& x : v) x = dist(rng);
  for (auto& x : q) x = dist(rng);
  // Slots {4, 1, 3}: gathered K/V rows in that order.
  const std::vector<int32_t> slots = {4, 1, 3};
  double logits[3], max = -1e30, sum = 0;
  for (size_t j = 0; j < 3; ++j) {
    double s = 0;
    for (int d = 0; d < head_dim; ++d) s += q[d] * k[slots[j] * head_dim + d];
    logits[j] = s * 0.5;
    max = std::max(max, logits[j]);
  }
  for (double& l : logits) sum += (l = std::exp(l - max));
  std::vector<float> scores(3), out(head_dim);
  attend_ref(q.data(), {k.data(), v.data(), head_dim, head_dim}, slots, 0.5f, scores.data(),
             out.data());
  for (int d = 0; d < head_dim; ++d) {
    double want = 0;
    for (size_t j = 0; j < 3; ++j) want += logits[j] / sum * v[slots[j] * head_dim + d];
    EXPECT_NEAR(out[static_cast<size_t>(d)], want, 1e-6);
  }
}

TEST(Attention, OneSlotReturnsItsValue) {
  const float q[2] = {1, 2}, k[4] = {0, 0, 3, 4}, v[4] = {9, 9, 5, -6};
  const int32_t slot = 1;
  float scores[1], out[2];
  attend(q, {k, v, 2, 2}, std::span<const int32_t>(&slot, 1), 1.0f, scores, out);
  EXPECT_FLOAT_EQ(out[0], 5.0f);
  EXPECT_FLOAT_EQ(out[1], -6.0f);
}

TEST(Attention, NoSlotsGivesZero) {
  const float q[2] = {1, 2}, k[2] = {0, 0}, v[2] = {1, 1};
  float out[2] = {7, 7};
  attend(q, {k, v, 2, 2}, {}, 1.0f, nullptr, out);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 0.0f);
}

}  // namespace
}  // namespace channel
