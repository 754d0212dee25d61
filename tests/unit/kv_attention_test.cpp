// Attention through the active-slot table: the scalar reference equals plain contiguous
// attention over the gathered K/V bit for bit, the SIMD kernel is within a stated tolerance
// of the reference, and f64 RoPE keeps relative rotations exact at large positions. Recall
// rows (f16, token-major) read the same as their keys widened into the f32 arena.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "ops/rope.h"
#include "kv/slot_attention.h"
#include "ops/fp16.h"
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
  c.rope = RopeFreqs::make(neox ? RopeStyle::neox : RopeStyle::normal, n_rot, 10000.0);
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
  EXPECT_THROW(RopeFreqs::make(RopeStyle::normal, 3, 10000.0), Error);
}

// An f32 arena of n_arena slots per KV head plus n_recall f16 recall rows starting at slot
// first = n_arena + gap, with rows pad halves longer than a token's K (or V) and a base
// misaligned by roff halves. The runs visit every arena and recall slot in shuffled order.
struct RecallCase {
  Case c;                        // query, rope and the f32 arena (shape.n_slots = n_arena)
  std::vector<uint16_t> rk, rv;  // [roff + n_recall * row_stride] f16 bits
  RecallRowsF16 recall;
};

RecallCase make_recall_case(uint32_t n_head, uint32_t n_kv, uint32_t hd, uint32_t n_arena,
                            uint32_t n_recall, std::vector<uint32_t> run_sizes, uint32_t seed,
                            uint32_t gap, uint32_t pad, uint32_t roff) {
  std::mt19937 rng(seed);
  RecallCase rc;
  Case& c = rc.c;
  c.shape = {n_head, n_kv, hd, n_arena};
  const uint32_t n_rot = hd % 2 == 0 ? hd : hd - 1;
  if (n_rot > 0)
    c.rope = RopeFreqs::make(seed % 2 ? RopeStyle::neox : RopeStyle::normal, n_rot, 10000.0);
  c.q = random_floats(size_t{n_head} * hd, rng, -2.0f, 2.0f);
  c.offset = seed % 3;
  c.k = random_floats(size_t{n_kv} * n_arena * hd + c.offset, rng);
  c.v = random_floats(size_t{n_kv} * n_arena * hd + c.offset, rng);
  const size_t stride = size_t{n_kv} * hd + pad;
  auto halves = [&] {
    std::vector<uint16_t> h(roff + n_recall * stride);
    const auto f = random_floats(h.size(), rng);
    for (size_t i = 0; i < h.size(); ++i) h[i] = fp32_to_fp16(f[i]);
    for (size_t i = 5; i < h.size(); i += 23)
      h[i] = static_cast<uint16_t>(i % 1023 + 1);              // subnormal
    for (size_t i = 11; i < h.size(); i += 29) h[i] = 0x8000;  // -0
    return h;
  };
  rc.rk = halves();
  rc.rv = halves();
  rc.recall = {rc.rk.data() + roff, rc.rv.data() + roff, n_arena + gap, n_recall, stride};
  if (n_recall == 0) rc.recall = {};
  std::vector<uint32_t> slots;
  for (uint32_t i = 0; i < n_arena; ++i) slots.push_back(i);
  for (uint32_t i = 0; i < n_recall; ++i) slots.push_back(n_arena + gap + i);
  std::shuffle(slots.begin(), slots.end(), rng);
  size_t at = 0;
  std::uniform_int_distribution<int64_t> pos(0, 3000000);
  for (uint32_t n : run_sizes) {
    c.runs.emplace_back(slots.begin() + at, slots.begin() + at + n);
    at += n;
    c.rope_pos.push_back(static_cast<double>(pos(rng)));
  }
  EXPECT_EQ(at, slots.size()) << "run sizes must cover every slot";
  return rc;
}

const uint32_t kRecallDims[] = {1, 3, 7, 15, 17, 31, 33, 63, 65, 128, 130};

struct RecallLayout {
  uint32_t n_arena, n_recall;
  std::vector<uint32_t> runs;
};

const RecallLayout kRecallLayouts[] = {
    {5, 0, {2, 3}},         // empty recall
    {0, 1, {1}},            // all-recall keys
    {0, 17, {9, 0, 8}},     // all-recall keys, several runs
    {3, 4, {7}},            // one run mixing both kinds
    {31, 33, {1, 40, 23}},  // mixed runs
    {2, 65, {30, 37}},
};

// The same tolerance as SimdMatchesReferenceAtAwkwardSizes: f16 widening is exact on both sides.
TEST(KvAttention, SimdMatchesReferenceWithRecallRows) {
  SlotAttnScratch scratch;
  uint32_t seed = 500;
  for (uint32_t hd : kRecallDims)
    for (const RecallLayout& L : kRecallLayouts)
      for (auto [nh, nkv] : {std::pair{3u, 3u}, {4u, 2u}, {4u, 1u}}) {  // GQA rep 1, 2, 4
        ++seed;
        const RecallCase rc = make_recall_case(nh, nkv, hd, L.n_arena, L.n_recall, L.runs, seed,
                                               seed % 2 ? 4 : 0, seed % 4 * 3, seed % 3);
        const Case& c = rc.c;
        const auto runs = c.slot_runs();
        const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
        std::vector<float> want(c.q.size()), got(c.q.size(), NAN);
        slot_attention_ref(c.shape, c.rope, c.q.data(), c.kp(), c.vp(), runs, scale, want.data(),
                           rc.recall);
        slot_attention(c.shape, c.rope, c.q.data(), c.kp(), c.vp(), runs, scale, got.data(),
                       scratch, rc.recall);
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_NEAR(got[i], want[i], 2e-5f * (1.0f + std::fabs(want[i])))
              << slot_attention_isa() << " hd " << hd << " arena " << L.n_arena << " recall "
              << L.n_recall << " heads " << nh << "/" << nkv << " i " << i;
      }
}

// Recall rows the runs never visit change nothing: the f32 path stays bit for bit.
TEST(KvAttention, UnvisitedRecallRowsLeaveTheArenaPathBitForBit) {
  SlotAttnScratch scratch;
  for (uint32_t hd : {7u, 64u, 130u}) {
    const RecallCase rc = make_recall_case(4, 2, hd, 40, 0, {10, 30}, hd, 0, 0, 0);
    std::vector<uint16_t> unused(size_t{2} * hd * 3, 0x3c00);  // [3][2 * hd] of 1.0
    const RecallRowsF16 recall{unused.data(), unused.data(), 50, 3, size_t{2} * hd};
    const Case& c = rc.c;
    const auto runs = c.slot_runs();
    std::vector<float> plain(c.q.size()), with(c.q.size());
    slot_attention(c.shape, c.rope, c.q.data(), c.kp(), c.vp(), runs, 0.1f, plain.data(), scratch);
    slot_attention(c.shape, c.rope, c.q.data(), c.kp(), c.vp(), runs, 0.1f, with.data(), scratch,
                   recall);
    EXPECT_EQ(std::memcmp(plain.data(), with.data(), plain.size() * sizeof(float)), 0);
    slot_attention_ref(c.shape, c.rope, c.q.data(), c.kp(), c.vp(), runs, 0.1f, plain.data());
    slot_attention_ref(c.shape, c.rope, c.q.data(), c.kp(), c.vp(), runs, 0.1f, with.data(),
                       recall);
    EXPECT_EQ(std::memcmp(plain.data(), with.data(), plain.size() * sizeof(float)), 0);
  }
}

// The reference with recall rows equals the reference over one bigger f32 arena holding the
// same rows widened at the same slots (gap slots hold NaN: never read).
TEST(KvAttention, ReferenceRecallRowsEqualWidenedArenaBitForBit) {
  uint32_t seed = 900;
  for (uint32_t hd : kRecallDims)
    for (const RecallLayout& L : kRecallLayouts)
      for (auto [nh, nkv] : {std::pair{3u, 3u}, {4u, 2u}, {4u, 1u}}) {
        ++seed;
        const uint32_t gap = seed % 2 ? 4 : 0;
        const RecallCase rc = make_recall_case(nh, nkv, hd, L.n_arena, L.n_recall, L.runs, seed,
                                               gap, seed % 4 * 3, seed % 3);
        const Case& c = rc.c;
        const uint32_t n_big = L.n_arena + gap + L.n_recall;
        std::vector<float> bk(size_t{nkv} * n_big * hd, NAN),
            bv(bk.size(), NAN);  // [nkv][n_big][hd]
        for (uint32_t g = 0; g < nkv; ++g) {
          for (uint32_t s = 0; s < L.n_arena; ++s)
            for (uint32_t d = 0; d < hd; ++d) {
              const size_t from = (size_t{g} * L.n_arena + s) * hd + d;
              bk[(size_t{g} * n_big + s) * hd + d] = c.kp()[from];
              bv[(size_t{g} * n_big + s) * hd + d] = c.vp()[from];
            }
          for (uint32_t i = 0; i < L.n_recall; ++i)
            for (uint32_t d = 0; d < hd; ++d) {
              const size_t from = i * rc.recall.row_stride + size_t{g} * hd + d;
              const size_t to = (size_t{g} * n_big + rc.recall.first + i) * hd + d;
              bk[to] = fp16_to_fp32(rc.recall.k[from]);
              bv[to] = fp16_to_fp32(rc.recall.v[from]);
            }
        }
        SlotAttnShape big = c.shape;
        big.n_slots = n_big;
        const auto runs = c.slot_runs();
        const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
        std::vector<float> got(c.q.size()), want(c.q.size());
        slot_attention_ref(c.shape, c.rope, c.q.data(), c.kp(), c.vp(), runs, scale, got.data(),
                           rc.recall);
        slot_attention_ref(big, c.rope, c.q.data(), bk.data(), bv.data(), runs, scale, want.data());
        ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
            << "hd " << hd << " arena " << L.n_arena << " recall " << L.n_recall;
      }
}

TEST(KvAttention, RecallSlotsOutsideBothRangesAndOverlapsAreErrors) {
  // Arena slots [0, 6), recall slots [10, 13).
  const RecallCase rc = make_recall_case(2, 1, 8, 6, 3, {9}, 3, 4, 2, 1);
  const Case& c = rc.c;
  std::vector<float> out(c.q.size());
  SlotAttnScratch scratch;
  auto ref = [&](std::vector<uint32_t> slots, const RecallRowsF16& recall) {
    const SlotRun run{slots.data(), static_cast<uint32_t>(slots.size()), 3.0};
    slot_attention_ref(c.shape, c.rope, c.q.data(), c.kp(), c.vp(), {&run, 1}, 1.0f, out.data(),
                       recall);
  };
  EXPECT_NO_THROW(ref({0, 5, 10, 12}, rc.recall));
  EXPECT_THROW(ref({0, 6}, rc.recall), Error);  // in the gap
  EXPECT_THROW(ref({9, 1}, rc.recall), Error);  // in the gap
  EXPECT_THROW(ref({13}, rc.recall), Error);    // past the recall rows
  EXPECT_THROW(ref({10, 6}, {}), Error);        // no recall rows at all
  RecallRowsF16 bad = rc.recall;
  bad.first = 5;  // overlaps the arena
  EXPECT_THROW(ref({0}, bad), Error);
  EXPECT_THROW(slot_attention(c.shape, c.rope, c.q.data(), c.kp(), c.vp(), {}, 1.0f, out.data(),
                              scratch, bad),
               Error);
  bad = rc.recall;
  bad.row_stride = 7;  // shorter than n_head_kv * head_dim
  EXPECT_THROW(ref({0}, bad), Error);
  bad = rc.recall;
  bad.v = nullptr;
  EXPECT_THROW(ref({0}, bad), Error);
  bad = rc.recall;
  bad.first = UINT32_MAX - 1;  // first + count overflows
  EXPECT_THROW(ref({0}, bad), Error);
  bad.count = 0;  // an empty range is never checked
  EXPECT_NO_THROW(ref({0}, bad));
}

// The identity behind query-side rotation: R(a) q . R(b) k == R(a - b) q . k, at positions
// far beyond any training context, because angles are taken in f64.
TEST(KvAttention, F64RopeKeepsRelativeRotationExactAtLargePositions) {
  std::mt19937 rng(5);
  for (RopeStyle layout : {RopeStyle::normal, RopeStyle::neox}) {
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

TEST(KvAttention, RopeStylesRotateTheRightPairs) {
  const RopeFreqs normal = RopeFreqs::make(RopeStyle::normal, 4, 100.0);
  const RopeFreqs neox = RopeFreqs::make(RopeStyle::neox, 4, 100.0);
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
