// Re-rotation of stored keys: rotating a key stored at p by Δ equals computing it at p + Δ
// directly (NEOX, NORMAL, partial rotary; positions up to 10^9), and an episode written to a
// store, rehydrated and re-rotated to the same relative distance gives the attention output
// of the original KV.
#include <cmath>
#include <random>
#include <vector>

#include "memory/episodic_store.h"
#include "memory/rerotate.h"
#include "memory_test_util.h"
#include "ops/fp16.h"
#include "util/error.h"

namespace channel {
namespace {

struct RopeCase {
  const char* name;
  RopeStyle style;
  uint32_t n_heads, head_dim, n_rot;
  double base;
};

const RopeCase kCases[] = {
    {"neox", RopeStyle::neox, 4, 64, 64, 10000.0},
    {"normal", RopeStyle::normal, 4, 64, 64, 10000.0},
    {"partial_neox", RopeStyle::neox, 2, 96, 32, 1000000.0},  // rotary on 1/3 of the head
    {"partial_normal", RopeStyle::normal, 3, 80, 20, 500000.0},
};

double rel_error(const std::vector<float>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / den);
}

TEST(MemoryRerotate, DeltaEqualsDirectRotation) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd;
  const double positions[][2] = {
      {0, 1}, {5, 3963}, {100000, -99000}, {123456, 7}, {1e9, -1e9 + 4000}, {4000, 1e6}, {17, -17}};
  for (const RopeCase& c : kCases) {
    const RotaryDims r = RotaryDims::make(c.style, c.n_heads, c.head_dim, c.n_rot, c.base);
    const size_t dim = r.row_dim();
    for (const auto& pd : positions) {
      const double p = pd[0], delta = pd[1];
      std::vector<float> raw(dim);
      for (auto& x : raw) x = nd(rng);
      std::vector<double> stored64(dim), target(dim);
      rope_row_f64_ref(r, p, raw.data(), stored64.data());
      rope_row_f64_ref(r, p + delta, raw.data(), target.data());
      std::vector<float> k(stored64.begin(), stored64.end());  // the f32 key in the cache
      rerotate_rows(r, delta, k.data(), 1);
      EXPECT_LT(rel_error(k, target), 1e-5) << c.name << " p=" << p << " delta=" << delta;
      // Dimensions past n_rot are untouched.
      for (uint32_t h = 0; h < c.n_heads; ++h) {
        for (uint32_t d = c.n_rot; d < c.head_dim; ++d) {
          ASSERT_EQ(k[h * c.head_dim + d], raw[h * c.head_dim + d]) << c.name;
        }
      }
    }
  }
}

TEST(MemoryRerotate, StylesPairDifferentDimensions) {
  // A unit vector on dim 1 rotated by a quarter turn of pair 0: NORMAL pairs (0, 1), so it
  // moves to dim 0; NEOX pairs (0, n_rot/2), so dim 1 belongs to pair 1 and turns less.
  RotaryDims normal = RotaryDims::make(RopeStyle::normal, 1, 4, 4, 10000.0);
  RotaryDims neox = RotaryDims::make(RopeStyle::neox, 1, 4, 4, 10000.0);
  const double quarter = M_PI / 2;  // inv_freq[0] = 1
  std::vector<float> a = {0, 1, 0, 0}, b = {0, 1, 0, 0};
  rerotate_rows(normal, quarter, a.data(), 1);
  rerotate_rows(neox, quarter, b.data(), 1);
  EXPECT_NEAR(a[0], -1.0f, 1e-6);
  EXPECT_NEAR(a[1], 0.0f, 1e-6);
  EXPECT_NEAR(b[1], std::cos(quarter * 0.01), 1e-6);  // pair 1: inv_freq = 10000^(-1/2)
  EXPECT_NEAR(b[3], std::sin(quarter * 0.01), 1e-6);
}

// softmax(q·k / sqrt(d)) v for one query over n keys, per head (no GQA needed here).
std::vector<double> attention(const std::vector<float>& q, const std::vector<float>& k,
                              const std::vector<float>& v, size_t n, size_t n_heads, size_t hd) {
  std::vector<double> out(n_heads * hd, 0.0);
  for (size_t h = 0; h < n_heads; ++h) {
    std::vector<double> s(n);
    double mx = -1e300;
    for (size_t j = 0; j < n; ++j) {
      double dot = 0;
      for (size_t d = 0; d < hd; ++d)
        dot += static_cast<double>(q[h * hd + d]) * k[(j * n_heads + h) * hd + d];
      s[j] = dot / std::sqrt(static_cast<double>(hd));
      mx = std::max(mx, s[j]);
    }
    double z = 0;
    for (auto& x : s) z += (x = std::exp(x - mx));
    for (size_t j = 0; j < n; ++j) {
      for (size_t d = 0; d < hd; ++d) out[h * hd + d] += s[j] / z * v[(j * n_heads + h) * hd + d];
    }
  }
  return out;
}

std::vector<float> rope_rows(const RotaryDims& r, const std::vector<float>& raw, size_t n,
                             double p0) {
  std::vector<float> out(raw.size());
  std::vector<double> tmp(r.row_dim());
  for (size_t j = 0; j < n; ++j) {
    rope_row_f64_ref(r, p0 + static_cast<double>(j), raw.data() + j * r.row_dim(), tmp.data());
    for (size_t i = 0; i < tmp.size(); ++i) out[j * r.row_dim() + i] = static_cast<float>(tmp[i]);
  }
  return out;
}

float round16(float x) {
  return fp16_to_fp32(fp32_to_fp16(x));
}

TEST(MemoryRerotate, RecalledEpisodeGivesTheOriginalAttention) {
  test::ScratchDir dir;
  for (const RopeCase& c : kCases) {
    const RotaryDims r = RotaryDims::make(c.style, c.n_heads, c.head_dim, c.n_rot, c.base);
    const size_t D = r.row_dim(), n = 9, L = 2;
    StoreGeometry g;
    g.num_layers = L;
    g.hidden_size = 8;
    g.kv_dim = static_cast<uint32_t>(D);
    g.max_episodes = 2;
    g.max_tokens = 16;
    StoreOptions o = test::not_durable();
    EpisodicStore store = EpisodicStore::create(dir.file(std::string(c.name) + ".mem"), g, 1, o);
    std::mt19937 rng(5);
    std::normal_distribution<float> nd;
    // The original: tokens at clocks 50000.., keys rotated there, as the KV cache holds them
    // (rounded to f16, the slab type, so that storage itself adds no error).
    const double p0 = 50000.0, pq = p0 + 40.0;
    std::vector<float> raw_k(L * n * D), v(L * n * D), q(D);
    for (auto& x : raw_k) x = nd(rng);
    for (auto& x : v) x = round16(nd(rng));
    for (auto& x : q) x = nd(rng);
    std::vector<float> kv;  // [L][2][n][D]
    std::vector<std::vector<float>> k_orig(L);
    for (size_t l = 0; l < L; ++l) {
      std::vector<float> raw(raw_k.begin() + l * n * D, raw_k.begin() + (l + 1) * n * D);
      k_orig[l] = rope_rows(r, raw, n, p0);
      for (auto& x : k_orig[l]) x = round16(x);
      kv.insert(kv.end(), k_orig[l].begin(), k_orig[l].end());
      kv.insert(kv.end(), v.begin() + l * n * D, v.begin() + (l + 1) * n * D);
    }
    std::vector<int32_t> tokens(n, 1);
    std::vector<float> centroid(8, 1.0f);
    EpisodeRecord rec;
    rec.start_clock = static_cast<uint64_t>(p0);
    rec.tokens = tokens;
    rec.centroid = centroid;
    rec.kv = kv;
    const uint64_t id = store.append(rec);
    // Recall into a frame where the query sits at 3968 + 40: Δ = 3968 - p0.
    const double target = 3968.0, delta = target - p0;
    std::vector<float> k_out(L * n * D), v_out(L * n * D);
    store.rehydrate(id, {&r, 1}, delta, k_out.data(), v_out.data());
    std::vector<float> q_orig(D), q_new(D);
    std::vector<double> tmp(D);
    rope_row_f64_ref(r, pq, q.data(), tmp.data());
    q_orig.assign(tmp.begin(), tmp.end());
    rope_row_f64_ref(r, pq + delta, q.data(), tmp.data());
    q_new.assign(tmp.begin(), tmp.end());
    for (size_t l = 0; l < L; ++l) {
      const std::vector<float> vl(v.begin() + l * n * D, v.begin() + (l + 1) * n * D);
      const std::vector<float> kl(k_out.begin() + l * n * D, k_out.begin() + (l + 1) * n * D);
      const std::vector<float> vr(v_out.begin() + l * n * D, v_out.begin() + (l + 1) * n * D);
      EXPECT_EQ(vr, vl) << "values are position-free and stored exactly";
      const auto a = attention(q_orig, k_orig[l], vl, n, c.n_heads, c.head_dim);
      const auto b = attention(q_new, kl, vr, n, c.n_heads, c.head_dim);
      double num = 0, den = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += a[i] * a[i];
      }
      EXPECT_LT(std::sqrt(num / den), 1e-5) << c.name << " layer " << l;
    }
  }
}

}  // namespace
}  // namespace channel

namespace channel {
namespace {

TEST(MemoryRerotate, FrequencyFactorsAndScaleCompose) {
  std::vector<float> factors(16);
  for (size_t i = 0; i < factors.size(); ++i) factors[i] = 1.0f + static_cast<float>(i) * 0.5f;
  const RotaryDims r =
      RotaryDims::make(RopeStyle::normal, 2, 32, 32, 500000.0, 0.25, factors.data());
  EXPECT_DOUBLE_EQ(r.inv_freq[3], 0.25 * std::pow(500000.0, -6.0 / 32) / 2.5);
  std::mt19937 rng(4);
  std::normal_distribution<float> nd;
  std::vector<float> raw(64);
  for (auto& x : raw) x = nd(rng);
  std::vector<double> stored(64), target(64);
  rope_row_f64_ref(r, 777777.0, raw.data(), stored.data());
  rope_row_f64_ref(r, 777777.0 - 700000.0, raw.data(), target.data());
  std::vector<float> k(stored.begin(), stored.end());
  rerotate_rows(r, -700000.0, k.data(), 1);
  EXPECT_LT(rel_error(k, target), 1e-5);
  factors[2] = 0.0f;
  EXPECT_THROW(RotaryDims::make(RopeStyle::normal, 2, 32, 32, 1e4, 1.0, factors.data()), Error);
  EXPECT_THROW(RotaryDims::make(RopeStyle::neox, 2, 32, 33, 1e4), Error);
}

}  // namespace
}  // namespace channel
