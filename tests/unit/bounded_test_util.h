// Shared helpers for the bounded-attention tests: geometries, random inputs, comparisons.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "bounded/bounded_config.h"
#include "bounded/bounded_rope.h"

namespace channel::test {

struct BoundedGeom {
  int n_heads, n_kv_heads, head_dim, rope_dims, window, n_sinks;
  double base;
};

inline std::string geom_name(const BoundedGeom& g) {
  return "nh" + std::to_string(g.n_heads) + "_kvh" + std::to_string(g.n_kv_heads) + "_hd" +
         std::to_string(g.head_dim) + "_rd" + std::to_string(g.rope_dims) + "_W" +
         std::to_string(g.window) + "_S" + std::to_string(g.n_sinks);
}

// Several W, S, rd (incl. rd < head_dim and rd = 0) and GQA ratios (1, 2, 3, 8).
inline std::vector<BoundedGeom> bounded_geoms() {
  return {
      {4, 4, 16, 16, 5, 2, 10000.0},     // MHA, full rotary
      {4, 2, 32, 16, 8, 4, 10000.0},     // GQA 2, half rotary
      {6, 2, 24, 8, 1, 0, 500.0},        // GQA 3, W = 1, no sinks
      {8, 1, 64, 64, 17, 1, 1000000.0},  // MQA, large base
      {2, 1, 34, 18, 64, 3, 10000.0},    // odd head_dim, partial rotary
      {3, 3, 20, 0, 3, 5, 10000.0},      // no rotation at all, S > W
  };
}

inline BoundedAttnCfg make_cfg(const BoundedGeom& g, const BoundedRope* rope) {
  BoundedAttnCfg c;
  c.n_heads = g.n_heads;
  c.n_kv_heads = g.n_kv_heads;
  c.head_dim = g.head_dim;
  c.rope_dims = g.rope_dims;
  c.window = g.window;
  c.n_sinks = g.n_sinks;
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(g.head_dim));
  c.rope = rope;
  return c;
}

inline std::vector<float> random_vec(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// max_i |a_i − b_i| ≤ tol · max_i |b_i| over each row of `row` floats.
inline void expect_rows_close(const float* a, const float* b, int64_t rows, int row, double tol,
                              const std::string& what) {
  for (int64_t r = 0; r < rows; ++r) {
    double max_ref = 0, max_err = 0;
    for (int i = 0; i < row; ++i) {
      max_ref = std::max(max_ref, std::fabs(static_cast<double>(b[r * row + i])));
      max_err = std::max(max_err, std::fabs(static_cast<double>(a[r * row + i]) - b[r * row + i]));
    }
    ASSERT_LE(max_err, tol * max_ref) << what << ": row " << r;
  }
}

}  // namespace channel::test
