// The bounded group kernel's check of simd_variants_test (backend/cpu/bounded_kernels.h):
// one variant against the scalar reference at head dims, rotary widths, sink counts and
// window lengths with tails of every width; and a head's bits do not depend on which other
// heads run beside it (the core slices GQA groups by thread count). Include only from
// simd_variants_test.cpp.
#pragma once

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/bounded_kernels.h"

namespace channel::simd_checks {

using cpu::BoundedGroupTask;

inline std::vector<float> bounded_floats(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Inputs of one group: keys and values as separate rows (misaligned by one float), a
// rotation table of unit (cos, sin) pairs.
struct BoundedGroup {
  int hd, half, S, len, n_q;
  std::vector<float> q, sk, sv, k, v, cos, sin;
  std::vector<const float*> keys, values;

  BoundedGroup(int hd_, int half_, int S_, int len_, int n_q_, std::mt19937& rng)
      : hd(hd_), half(half_), S(S_), len(len_), n_q(n_q_) {
    q = bounded_floats(static_cast<size_t>(n_q) * hd, rng, 2.0f);
    sk = bounded_floats(static_cast<size_t>(S) * hd + 1, rng, 1.5f);
    sv = bounded_floats(static_cast<size_t>(S) * hd + 1, rng);
    k = bounded_floats(static_cast<size_t>(len) * (hd + 3) + 1, rng);
    v = bounded_floats(static_cast<size_t>(len) * (hd + 3) + 1, rng);
    std::uniform_real_distribution<float> angle(-3.1f, 3.1f);
    for (int i = 0; i < len * half; ++i) {
      const float a = angle(rng);
      cos.push_back(std::cos(a));
      sin.push_back(std::sin(a));
    }
    for (int d = 0; d < len; ++d) {  // rows in reverse order, as the ring hands them over
      keys.push_back(k.data() + 1 + static_cast<size_t>(len - 1 - d) * (hd + 3));
      values.push_back(v.data() + 1 + static_cast<size_t>(len - 1 - d) * (hd + 3));
    }
  }

  // Heads [h0, h0 + n) of the group into out ([n_q][hd], only those rows written).
  void run(cpu::BoundedGroupFn fn, int h0, int n, std::vector<float>& out) const {
    std::vector<float> scores(static_cast<size_t>(n) * (S + len + 1), -7.0f);
    BoundedGroupTask t;
    t.head_dim = hd;
    t.half = half;
    t.n_sinks = S;
    t.len = len;
    t.n_q = n;
    t.scale = 1.0f / std::sqrt(static_cast<float>(hd));
    t.q = q.data() + static_cast<size_t>(h0) * hd;
    t.sink_k = sk.data() + 1;
    t.sink_v = sv.data() + 1;
    t.keys = keys.data();
    t.values = values.data();
    t.cos = cos.data();
    t.sin = sin.data();
    t.scores = scores.data();
    t.score_stride = static_cast<size_t>(S + len + 1);
    t.out = out.data() + static_cast<size_t>(h0) * hd;
    fn(t);
  }
};

inline void check_bounded_kernels(const cpu::BoundedKernelVariant& variant) {
  std::mt19937 rng(31);
  for (int hd : {1, 2, 7, 15, 16, 17, 34, 64, 67, 130}) {
    for (int half : {0, 1, hd / 4, hd / 2}) {
      if (2 * half > hd) continue;
      for (int S : {0, 1, 4, 17}) {
        for (int len : {1, 5, 8, 16, 17, 40, 256}) {
          const int n_q = 3;
          const BoundedGroup g(hd, half, S, len, n_q, rng);
          std::vector<float> want(static_cast<size_t>(n_q) * hd), got(want.size(), -1.0f);
          g.run(cpu::bounded_group_attend_ref, 0, n_q, want);
          g.run(variant.fn, 0, n_q, got);
          for (size_t i = 0; i < want.size(); ++i) {
            ASSERT_NEAR(got[i], want[i], 2e-5f * (1.0f + std::fabs(want[i])))
                << variant.isa << " hd " << hd << " half " << half << " S " << S << " len " << len
                << " at " << i;
          }
        }
      }
    }
  }
  for (int hd : {16, 34, 64}) {
    const int n_q = 5;
    const BoundedGroup g(hd, hd / 4, 4, 100, n_q, rng);
    std::vector<float> all(static_cast<size_t>(n_q) * hd), alone(all.size());
    g.run(variant.fn, 0, n_q, all);
    for (int h = 0; h < n_q; ++h) g.run(variant.fn, h, 1, alone);
    g.run(variant.fn, 1, 3, alone);  // a slice in the middle, as a thread's share
    EXPECT_EQ(0, std::memcmp(all.data(), alone.data(), all.size() * sizeof(float)))
        << variant.isa << " hd " << hd << ": a head's bits depend on its neighbours";
  }
}

}  // namespace channel::simd_checks
