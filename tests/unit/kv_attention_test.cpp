// Attention through the active-slot table: the scalar reference equals plain contiguous
// attention over the gathered K/V bit for bit, the SIMD kernel is within a stated tolerance
// of the reference, and f64 RoPE keeps relative rotations exact at large positions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kv/rope_f64.h"
#include "kv/slot_attention.h"
#include "util/error.h"

namespace channel {
namespace {

std::vector<float> random_floats(size_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

struct Case {
  SlotAttnShape shape;
  RopeFreqs rope;
  std::vector<float> q;                     // [n_head][hd]
  std::vector<float> k, v;                  // [n_kv][n_slots][hd] (+1 for a misaligned start)
  size_t offset = 0;                        // misalignment of the arena start, in floats
  std::vector<std::vector<uint32_t>> runs;  // slot lists
  std::vector<double> rope_pos;
  std::vector<SlotRun> slot_runs() const {
    std::vector<SlotRun> out;
    for (size_t r = 0; r < runs.size(); ++r)
      out.push_back({runs[r].data(), static_cast<uint32_t>(runs[r].size()), rope_pos[r]});
    return out;
  }
  const float* kp() const { return k.data() + offset; }
  const float* vp() const { return v.data() + offset; }
};

Case make_case(uint32_t n_head, uint32_t n_kv, uint32_t hd, uint32_t n_slots,
               std::vector<uint32_t> run_sizes, uint32_t seed, bool neox, size_t offset) {
  std::mt19937 rng(seed);
  Case c;
  c.shape = {n_head, n_kv, hd, n_slots};
  const uint32_t n_rot = hd % 2 == 0 ? hd : hd - 1;  // odd head_dim: the last dim unrotated
  c.rope = RopeFreqs::make(neox ? RopeLayout::neox : RopeLayout::normal, n_rot, 10000.0);
  c.q = random_floats(size_t{n_head} * hd, rng, -2.0f, 2.0f);
  c.offset = offset;
  c.k = random_floats(size_t{n_kv} * n_slots * hd + offset, rng);
  c.v = random_floats(size_t{n_kv} * n_slots * hd + offset, rng);
  std::vector<uint32_t> perm(n_slots);
  for (uint32_t i = 0; i < n_slots; ++i) perm[i] = i;
  std::shuffle(perm.begin(), perm.end(), rng);
  size_t at = 0;
  std::uniform_int_distribution<int64_t> pos(0, 3000000);
  for (uint32_t n : run_sizes) {
    c.runs.emplace_back(perm.begin() + at, perm.begin() + at + n);
    at += n;
    c.rope_pos.push_back(static_cast<double>(pos(rng)));
  }
  return c;
}

// Gathers the case's keys into contiguous [n_keys][n_kv][hd] rows and rotates the query per
// run, then runs plain attention.
std::vector<float> contiguous(const Case& c, float scale) {
  const uint32_t hd = c.shape.head_dim, nkv = c.shape.n_head_kv;
  std::vector<float> qrot, k, v;
  std::vector<uint32_t> group;
  for (size_t r = 0; r < c.runs.size(); ++r) {
    std::vector<float> qr(c.q.size());
    rope_rotate_at(c.rope, c.rope_pos[r], c.q.data(), qr.data(), c.shape.n_head, hd);
    qrot.insert(qrot.end(), qr.begin(), qr.end());
    for (uint32_t slot : c.runs[r]) {
      group.push_back(static_cast<uint32_t>(r));
      for (uint32_t g = 0; g < nkv; ++g) {
        const float* ks = c.kp() + (size_t{g} * c.shape.n_slots + slot) * hd;
        const float* vs = c.vp() + (size_t{g} * c.shape.n_slots + slot) * hd;
        k.insert(k.end(), ks, ks + hd);
        v.insert(v.end(), vs, vs + hd);
      }
    }
  }
  std::vector<float> out(c.q.size());
  contiguous_attention_ref(c.shape, qrot.data(), group, k.data(), v.data(), scale, out.data());
  return out;
}

const uint32_t kAwkward[] = {1, 2, 3, 7, 15, 16, 17, 31, 33, 63, 64, 65, 128, 256};

TEST(KvAttention, ReferenceEqualsContiguousAttentionBitForBit) {
  uint32_t seed = 1;
  for (uint32_t hd : kAwkward)
    for (auto [nh, nkv] : {std::pair{1u, 1u}, {4u, 1u}, {6u, 2u}, {8u, 8u}}) {
      if (hd == 1) continue;  // RoPE needs a pair
      const uint32_t n_slots = 97;
      ++seed;
      Case c = make_case(nh, nkv, hd, n_slots, {5, 0, 3, 33}, seed, seed % 2, seed % 3);
      std::vector<float> got(c.q.size());
      const auto runs = c.slot_runs();
      const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
      slot_attention_ref(c.shape, c.rope, c.q.data(), c.kp(), c.vp(), runs, scale, got.data());
      const std::vector<float> want = contiguous(c, scale);
      ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
          << "hd " << hd << " heads " << nh << "/" << nkv;
    }
}

// Tolerance of the SIMD kernel: FMA and a different summation order in the dots, and a
// polynomial exp (about 2 ulp): |simd - ref| <= 2e-5 * (1 + |ref|) per output, with
// |q| <= 2, |k|, |v| <= 1 and scale 1/sqrt(hd).
TEST(KvAttention, SimdMatchesReferenceAtAwkwardSizes) {
  SlotAttnScratch scratch;
  uint32_t seed = 100;
  const std::vector<std::vector<uint32_t>> layouts = {
      {1}, {3}, {7, 0, 8}, {15, 2}, {17}, {31, 1, 1}, {33}, {63, 2, 64}, {65, 100}, {300, 5, 700}};
  for (uint32_t hd : kAwkward)
    for (const auto& layout : layouts)
      for (auto [nh, nkv] : {std::pair{1u, 1u}, {4u, 1u}, {6u, 2u}, {3u, 3u}}) {
        if (hd == 1) continue;
        uint32_t total = 0;
        for (uint32_t n : layout) total += n;
        ++seed;
        Case c = make_case(nh, nkv, hd, total + 3, layout, seed, seed % 2, seed % 5);
        const auto runs = c.slot_runs();
        const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
        std::vector<float> want(c.q.size()), got(c.q.size(), NAN);
        slot_attention_ref(c.shape, c.rope, c.q.data(), c.kp(), c.vp(), runs, scale, want.data());
        slot_attention(c.shape, c.rope, c.q.data(), c.kp(), c.vp(), runs, scale, got.data(),
                       scratch);
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_NEAR(got[i], want[i], 2e-5f * (1.0f + std::fabs(want[i])))
              << slot_attention_isa() << " hd " << hd << " keys " << total << " heads " << nh << "/"
              << nkv << " i " << i;
      }
}

TEST(KvAttention, NoKeysGivesZerosAndBadShapesAreErrors) {
  Case c = make_case(2, 1, 8, 4, {0}, 7, false, 0);
  std::vector<float> out(c.q.size(), 1.0f);
  SlotAttnScratch scratch;
  slot_attention(c.shape, c.rope, c.q.data(), c.kp(), c.vp(), c.slot_runs(), 1.0f, out.data(),
                 scratch);
  for (float x : out) EXPECT_EQ(x, 0.0f);
  std::fill(out.begin(), out.end(), 1.0f);
  slot_attention_ref(c.shape, c.rope, c.q.data(), c.kp(), c.vp(), {}, 1.0f, out.data());
  for (float x : out) EXPECT_EQ(x, 0.0f);
  SlotAttnShape bad = c.shape;
  bad.n_head_kv = 3;
  EXPECT_THROW(
      slot_attention(bad, c.rope, c.q.data(), c.kp(), c.vp(), {}, 1.0f, out.data(), scratch),
      Error);
  const uint32_t outside[] = {4};
  const SlotRun run{outside, 1, 0.0};
  EXPECT_THROW(
      slot_attention_ref(c.shape, c.rope, c.q.data(), c.kp(), c.vp(), {&run, 1}, 1.0f, out.data()),
      Error);
  EXPECT_THROW(RopeFreqs::make(RopeLayout::normal, 3, 10000.0), Error);
}

// The identity behind query-side rotation: R(a) q . R(b) k == R(a - b) q . k, at positions
// far beyond any training context, because angles are taken in f64.
TEST(KvAttention, F64RopeKeepsRelativeRotationExactAtLargePositions) {
  std::mt19937 rng(5);
  for (RopeLayout layout : {RopeLayout::normal, RopeLayout::neox}) {
    const RopeFreqs rope = RopeFreqs::make(layout, 64, 10000.0);
    const auto q = random_floats(64, rng), k = random_floats(64, rng);
    for (double base : {0.0, 1e3, 1e6, 1e9}) {
      const double a = base + 4000, b = base + 17;
      std::vector<float> qa(64), kb(64), qd(64);
      rope_rotate_at(rope, a, q.data(), qa.data(), 1, 64);
      rope_rotate_at(rope, b, k.data(), kb.data(), 1, 64);
      rope_rotate_at(rope, a - b, q.data(), qd.data(), 1, 64);
      double s1 = 0, s2 = 0;
      for (int d = 0; d < 64; ++d) {
        s1 += double{qa[d]} * kb[d];
        s2 += double{qd[d]} * k[d];
      }
      EXPECT_NEAR(s1, s2, 2e-5) << "base " << base;
    }
  }
}

TEST(KvAttention, RopeLayoutsRotateTheRightPairs) {
  const RopeFreqs normal = RopeFreqs::make(RopeLayout::normal, 4, 100.0);
  const RopeFreqs neox = RopeFreqs::make(RopeLayout::neox, 4, 100.0);
  const float x[6] = {1, 0, 0, 0, 5, 6};  // dims 4, 5 are beyond n_rot: copied
  float y[6];
  rope_rotate_at(normal, 1.0, x, y, 1, 6);
  EXPECT_FLOAT_EQ(y[0], std::cos(1.0f));
  EXPECT_FLOAT_EQ(y[1], std::sin(1.0f));
  EXPECT_EQ(y[4], 5.0f);
  EXPECT_EQ(y[5], 6.0f);
  rope_rotate_at(neox, 1.0, x, y, 1, 6);
  EXPECT_FLOAT_EQ(y[0], std::cos(1.0f));
  EXPECT_FLOAT_EQ(y[2], std::sin(1.0f));  // NEOX pairs (i, i + n_rot/2)
  EXPECT_EQ(y[1], 0.0f);
}

}  // namespace
}  // namespace channel
