// Rehydration kernels and the fused recall path: the SIMD convert+rotate kernel and the f64
// rotation composition are bit-identical to their scalar references at awkward sizes and
// misaligned starts; the references agree with rotate_rows and exact-angle sin/cos;
// RotationTable matches std::cos/sin; rehydrating straight into slot arenas (store ->
// RingSession recall slots) is bit-identical to the two-step path (dense buffers, then
// inject_recall's copy), serial or split over a pool; and a failing fill leaves no episode
// active.
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/thread_pool.h"
#include "gguf/gguf_writer.h"
#include "kv/kv_rows.h"
#include "memory/episodic_store.h"
#include "memory/memory_attachment.h"
#include "gguf/model_signature.h"
#include "memory/rehydrate_kernels.h"
#include "memory/rerotate.h"
#include "memory_test_util.h"
#include "model/model.h"
#include "model/random_model.h"
#include "ops/fp16.h"
#include "runtime/ring_session.h"
#include "util/aligned_vector.h"
#include "util/error.h"

namespace channel {
namespace {

constexpr float kSentinel = -12345.5f;

struct Shape {
  bool neox;
  uint32_t n_heads, head_dim, n_rot;
};

// Awkward head sizes: below, at and past 8/16-lane multiples, partial and full rotary.
std::vector<Shape> shapes() {
  std::vector<Shape> out;
  for (bool neox : {true, false})
    for (uint32_t hd : {2u, 6u, 14u, 16u, 18u, 30u, 34u, 62u, 64u, 66u, 96u, 128u, 130u})
      for (uint32_t n_rot : {2u, hd / 2 - (hd / 2) % 2, hd - 2, hd})
        if (n_rot >= 2 && n_rot <= hd)
          for (uint32_t heads : {1u, 3u}) out.push_back({neox, heads, hd, n_rot});
  return out;
}

std::vector<float> random_angles(uint32_t n_rot, bool neox, std::mt19937& rng,
                                 std::vector<float>* s) {
  std::uniform_real_distribution<double> ud(-3.2, 3.2);
  std::vector<double> cd(n_rot / 2), sd(n_rot / 2);
  for (uint32_t i = 0; i < n_rot / 2; ++i) {
    const double a = ud(rng);
    cd[i] = std::cos(a);
    sd[i] = std::sin(a);
  }
  std::vector<float> c(n_rot);
  s->resize(n_rot);
  expand_rotation(neox, n_rot, cd.data(), sd.data(), c.data(), s->data());
  return c;
}

TEST(MemoryRehydrate, KernelIsBitIdenticalToReference) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  for (const Shape& sh : shapes()) {
    std::vector<float> s;
    const std::vector<float> c = random_angles(sh.n_rot, sh.neox, rng, &s);
    const HeadRotation rot{sh.neox, sh.n_rot, c.data(), s.data()};
    const size_t row = size_t{sh.n_heads} * sh.head_dim;
    for (size_t n : {1u, 3u, 7u, 17u}) {
      for (size_t mis : {0u, 1u}) {  // misaligned source and destination starts
        for (bool arena : {false, true}) {
          // Dense rows, or arena-like: heads n_slots apart, rows head_dim apart.
          const size_t slots = n + 5;
          const RowLayout lay{sh.n_heads, sh.head_dim, arena ? sh.head_dim : row + 3,
                              arena ? slots * sh.head_dim + 1 : sh.head_dim};
          const size_t dst_size = mis + (n - 1) * lay.token_stride +
                                  (sh.n_heads - 1) * lay.head_stride + sh.head_dim + 8;
          std::vector<uint16_t> src16(mis + n * row);
          std::vector<float> src32(mis + n * row);
          for (size_t i = 0; i < src16.size(); ++i) {
            src16[i] = fp32_to_fp16(nd(rng));
            src32[i] = nd(rng);
          }
          for (const HeadRotation* r : {&rot, static_cast<const HeadRotation*>(nullptr)}) {
            std::vector<float> want(dst_size, kSentinel), got(dst_size, kSentinel);
            f16_rows_to_f32_ref(r, src16.data() + mis, n, lay, want.data() + mis);
            f16_rows_to_f32(r, src16.data() + mis, n, lay, got.data() + mis);
            ASSERT_EQ(0, std::memcmp(want.data(), got.data(), dst_size * sizeof(float)))
                << "f16 neox=" << sh.neox << " heads=" << sh.n_heads << " hd=" << sh.head_dim
                << " n_rot=" << sh.n_rot << " n=" << n << " mis=" << mis << " arena=" << arena
                << " rotated=" << (r != nullptr);
            std::fill(want.begin(), want.end(), kSentinel);
            std::fill(got.begin(), got.end(), kSentinel);
            f32_rows_to_f32_ref(r, src32.data() + mis, n, lay, want.data() + mis);
            f32_rows_to_f32(r, src32.data() + mis, n, lay, got.data() + mis);
            ASSERT_EQ(0, std::memcmp(want.data(), got.data(), dst_size * sizeof(float)))
                << "f32 neox=" << sh.neox << " hd=" << sh.head_dim << " n_rot=" << sh.n_rot;
            // Only the rows' own floats are written.
            size_t written = 0;
            for (float x : got) written += x != kSentinel;
            EXPECT_EQ(written, n * row);
          }
        }
      }
    }
  }
}

// f16 to f16 (a session's recall tier): bit-identical to the reference, out of place and in
// place, and the reference is the f32 kernel's result rounded to f16.
TEST(MemoryRehydrate, F16KernelIsBitIdenticalToReference) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 4.0f);
  for (const Shape& sh : shapes()) {
    std::vector<float> s;
    const std::vector<float> c = random_angles(sh.n_rot, sh.neox, rng, &s);
    const HeadRotation rot{sh.neox, sh.n_rot, c.data(), s.data()};
    const size_t row = size_t{sh.n_heads} * sh.head_dim;
    for (size_t n : {1u, 3u, 7u, 17u}) {
      for (size_t mis : {0u, 1u}) {
        std::vector<uint16_t> src(mis + n * row + 8, 0x7bad);
        for (size_t i = mis; i < mis + n * row; ++i) src[i] = fp32_to_fp16(nd(rng));
        for (const HeadRotation* r : {&rot, static_cast<const HeadRotation*>(nullptr)}) {
          std::vector<uint16_t> want(src.size(), 0x7bad), got(src.size(), 0x7bad);
          f16_rows_to_f16_ref(r, src.data() + mis, n, sh.n_heads, sh.head_dim, want.data() + mis);
          f16_rows_to_f16(r, src.data() + mis, n, sh.n_heads, sh.head_dim, got.data() + mis);
          ASSERT_EQ(want, got) << "neox=" << sh.neox << " heads=" << sh.n_heads
                               << " hd=" << sh.head_dim << " n_rot=" << sh.n_rot << " n=" << n
                               << " mis=" << mis << " rotated=" << (r != nullptr);
          std::vector<uint16_t> in_place = src;
          f16_rows_to_f16(r, in_place.data() + mis, n, sh.n_heads, sh.head_dim,
                          in_place.data() + mis);
          ASSERT_EQ(want, in_place) << "in place, hd=" << sh.head_dim << " n_rot=" << sh.n_rot;
          std::vector<uint16_t> ref_in_place = src;
          f16_rows_to_f16_ref(r, ref_in_place.data() + mis, n, sh.n_heads, sh.head_dim,
                              ref_in_place.data() + mis);
          ASSERT_EQ(want, ref_in_place);
          std::vector<float> wide(n * row);
          const RowLayout dense{sh.n_heads, sh.head_dim, row, sh.head_dim};
          f16_rows_to_f32_ref(r, src.data() + mis, n, dense, wide.data());
          for (size_t i = 0; i < wide.size(); ++i)
            ASSERT_EQ(want[mis + i], fp32_to_fp16(wide[i])) << i;
        }
      }
    }
  }
}

// Non-temporal stores (aligned rows of the unrolled head sizes) write the same values.
TEST(MemoryRehydrate, StreamingStoresWriteTheSameValues) {
  std::mt19937 rng(6);
  std::normal_distribution<float> nd;
  for (bool neox : {true, false}) {
    for (uint32_t hd : {64u, 128u, 256u}) {
      std::vector<float> s;
      const std::vector<float> c = random_angles(hd, neox, rng, &s);
      const HeadRotation rot{neox, hd, c.data(), s.data()};
      const uint32_t heads = 3, slots = 21;
      const size_t n = 17, arena = size_t{heads} * slots * hd;
      std::vector<uint16_t> src(n * heads * hd);
      for (auto& x : src) x = fp32_to_fp16(nd(rng));
      for (const HeadRotation* r : {&rot, static_cast<const HeadRotation*>(nullptr)}) {
        for (size_t first : {0u, 3u}) {
          RowLayout lay{heads, hd, hd, size_t{slots} * hd};  // arena rows from slot `first`
          AlignedVector<float> want(arena, kSentinel), got(arena, kSentinel);
          f16_rows_to_f32_ref(r, src.data(), n, lay, want.data() + first * hd);
          lay.stream = true;
          f16_rows_to_f32(r, src.data(), n, lay, got.data() + first * hd);
          ASSERT_EQ(0, std::memcmp(want.data(), got.data(), arena * sizeof(float)))
              << "neox=" << neox << " hd=" << hd << " first=" << first;
          // Unaligned: the same values through normal stores.
          std::fill(got.begin(), got.end(), kSentinel);
          f16_rows_to_f32(r, src.data(), n, lay, got.data() + first * hd + 1);
          ASSERT_EQ(0, std::memcmp(want.data() + first * hd, got.data() + first * hd + 1,
                                   (arena - first * hd - 1) * sizeof(float)));
        }
      }
    }
  }
}

// The reference does what rotate_rows (the plain Givens rotation) does, up to the fma.
TEST(MemoryRehydrate, ReferenceAgreesWithRotateRows) {
  std::mt19937 rng(4);
  std::normal_distribution<float> nd;
  for (const Shape& sh : shapes()) {
    const RotaryDims r = RotaryDims::make(sh.neox ? RopeStyle::neox : RopeStyle::normal,
                                          sh.n_heads, sh.head_dim, sh.n_rot, 10000.0);
    const double delta = -123457.0;
    std::vector<double> cd(sh.n_rot / 2), sd(sh.n_rot / 2);
    for (size_t i = 0; i < cd.size(); ++i) {
      cd[i] = std::cos(delta * r.inv_freq[i]);
      sd[i] = std::sin(delta * r.inv_freq[i]);
    }
    std::vector<float> c(sh.n_rot), s(sh.n_rot);
    expand_rotation(sh.neox, sh.n_rot, cd.data(), sd.data(), c.data(), s.data());
    const HeadRotation rot{sh.neox, sh.n_rot, c.data(), s.data()};
    const size_t n = 3, row = r.row_dim();
    std::vector<float> x(n * row);
    for (auto& v : x) v = nd(rng);
    std::vector<float> want = x, got(n * row);
    rerotate_rows(r, delta, want.data(), n);
    f32_rows_to_f32_ref(&rot, x.data(), n, {sh.n_heads, sh.head_dim, row, sh.head_dim}, got.data());
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 2e-6f * (1.0f + std::fabs(want[i])))
          << "neox=" << sh.neox << " hd=" << sh.head_dim << " n_rot=" << sh.n_rot << " i=" << i;
  }
}

TEST(MemoryRehydrate, ComposeIsBitIdenticalToReference) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> ud(-1.0, 1.0);
  for (size_t n : {1u, 3u, 7u, 8u, 9u, 15u, 16u, 17u, 31u, 33u, 63u, 65u}) {
    for (size_t mis : {0u, 1u}) {
      std::vector<double> c(n + mis), s(n + mis), C(n + mis), S(n + mis);
      for (size_t i = 0; i < n + mis; ++i) {
        c[i] = ud(rng);
        s[i] = ud(rng);
        C[i] = ud(rng);
        S[i] = ud(rng);
      }
      std::vector<double> c2 = c, s2 = s;
      compose_rotations_ref(c.data() + mis, s.data() + mis, C.data() + mis, S.data() + mis, n);
      compose_rotations(c2.data() + mis, s2.data() + mis, C.data() + mis, S.data() + mis, n);
      ASSERT_EQ(0, std::memcmp(c.data(), c2.data(), c.size() * sizeof(double))) << n;
      ASSERT_EQ(0, std::memcmp(s.data(), s2.data(), s.size() * sizeof(double))) << n;
    }
  }
}

// A chain of 1..8 rotations multiplied in registers equals successive compose_rotations_ref
// calls bit for bit; the SIMD expansion of pair angles equals the reference (signed zeros too).
TEST(MemoryRehydrate, ChainAndExpandAreBitIdenticalToReference) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<double> ud(-1.0, 1.0);
  for (size_t n : {1u, 3u, 4u, 7u, 8u, 9u, 15u, 16u, 17u, 31u, 32u, 33u, 65u}) {
    for (int factors = 1; factors <= 8; ++factors) {
      std::vector<std::vector<double>> C(factors, std::vector<double>(n + 1)), S = C;
      std::vector<const double*> cp, sp;
      for (int j = 0; j < factors; ++j) {
        for (size_t i = 0; i <= n; ++i) {
          C[j][i] = ud(rng);
          S[j][i] = ud(rng);
        }
        cp.push_back(C[j].data() + 1);  // misaligned by one double
        sp.push_back(S[j].data() + 1);
      }
      std::vector<double> c(n), s(n), c2(n), s2(n);
      chain_rotations(cp.data(), sp.data(), factors, n, c.data(), s.data());
      chain_rotations_ref(cp.data(), sp.data(), factors, n, c2.data(), s2.data());
      std::vector<double> c3(cp[0], cp[0] + n), s3(sp[0], sp[0] + n);
      for (int j = 1; j < factors; ++j)
        compose_rotations_ref(c3.data(), s3.data(), cp[j], sp[j], n);
      ASSERT_EQ(0, std::memcmp(c.data(), c2.data(), n * sizeof(double))) << n << " " << factors;
      ASSERT_EQ(0, std::memcmp(s.data(), s2.data(), n * sizeof(double))) << n << " " << factors;
      ASSERT_EQ(0, std::memcmp(c2.data(), c3.data(), n * sizeof(double))) << n << " " << factors;
      ASSERT_EQ(0, std::memcmp(s2.data(), s3.data(), n * sizeof(double))) << n << " " << factors;
    }
  }
  for (bool neox : {true, false}) {
    for (uint32_t n_rot : {2u, 6u, 14u, 16u, 18u, 30u, 32u, 34u, 64u, 66u, 128u, 130u}) {
      std::vector<double> cd(n_rot / 2), sd(n_rot / 2);
      for (size_t i = 0; i < cd.size(); ++i) {
        cd[i] = i % 5 == 0 ? 0.0 : ud(rng);
        sd[i] = i % 7 == 0 ? -0.0 : i % 3 == 0 ? 0.0 : ud(rng);
      }
      std::vector<float> c(n_rot + 3, kSentinel), s = c, c2 = c, s2 = c;
      expand_rotation(neox, n_rot, cd.data(), sd.data(), c.data() + 1, s.data() + 1);
      expand_rotation_ref(neox, n_rot, cd.data(), sd.data(), c2.data() + 1, s2.data() + 1);
      ASSERT_EQ(0, std::memcmp(c.data(), c2.data(), c.size() * sizeof(float))) << n_rot;
      ASSERT_EQ(0, std::memcmp(s.data(), s2.data(), s.size() * sizeof(float))) << n_rot;
    }
  }
}

// cos/sin of Δ·θ composed from the 2^j table: within 1e-12 of the exact angle's (double-double
// angle hi + lo), for every Δ the clocks allow; fractional and huge Δ fall back to std::cos/sin.
TEST(MemoryRehydrate, RotationTableIsF64Accurate) {
  for (uint32_t n_rot : {2u, 16u, 64u, 128u}) {
    for (double base : {10000.0, 1000000.0}) {
      const RotaryDims r = RotaryDims::make(RopeStyle::neox, 1, n_rot, n_rot, base);
      const RotationTable t(r);
      ASSERT_TRUE(t.matches(r));
      ASSERT_EQ(t.n_pairs(), n_rot / 2);
      const double deltas[] = {0,          1,
                               -1,         7,
                               -4000,      12345,
                               -99999,     1048576,
                               2147483647, -2147483648.0,
                               4.0e9,      -4294967295.0};
      std::vector<double> c(n_rot / 2), s(n_rot / 2);
      for (double d : deltas) {
        t.cos_sin(d, c.data(), s.data());
        for (uint32_t i = 0; i < n_rot / 2; ++i) {
          // The exact angle is hi + lo (fma gives the product's rounding error exactly);
          // first order in lo is enough (lo^2 < 1e-13 for these Δ).
          const double hi = d * r.inv_freq[i], lo = std::fma(d, r.inv_freq[i], -hi);
          const double want_c = std::cos(hi) - std::sin(hi) * lo;
          const double want_s = std::sin(hi) + std::cos(hi) * lo;
          ASSERT_NEAR(c[i], want_c, 1e-12) << d << " " << i;
          ASSERT_NEAR(s[i], want_s, 1e-12) << d << " " << i;
          if (std::fabs(d) <= 1e4) {  // where std::cos(Δ·θ) itself is that accurate
            ASSERT_NEAR(c[i], std::cos(d * r.inv_freq[i]), 1e-12);
            ASSERT_NEAR(s[i], std::sin(d * r.inv_freq[i]), 1e-12);
          }
        }
      }
      for (double d : {0.5, -3.25, 1e10, -1e12}) {  // outside the table: std::cos/sin exactly
        t.cos_sin(d, c.data(), s.data());
        for (uint32_t i = 0; i < n_rot / 2; ++i) {
          ASSERT_EQ(c[i], std::cos(d * r.inv_freq[i]));
          ASSERT_EQ(s[i], std::sin(d * r.inv_freq[i]));
        }
      }
    }
  }
  const RotaryDims other = RotaryDims::make(RopeStyle::neox, 1, 16, 16, 500.0);
  EXPECT_FALSE(
      RotationTable(RotaryDims::make(RopeStyle::neox, 1, 16, 16, 10000.0)).matches(other));
}

// --- the store into strided targets -----------------------------------------------------

struct StoreCase {
  const char* name;
  RopeStyle style;
  uint32_t n_heads, head_dim, n_rot;
  SlabType slab;
};

const StoreCase kStoreCases[] = {
    {"neox_f16", RopeStyle::neox, 2, 64, 64, SlabType::f16},
    {"normal_f16", RopeStyle::normal, 3, 34, 34, SlabType::f16},
    {"partial_neox_f16", RopeStyle::neox, 2, 96, 32, SlabType::f16},
    {"partial_normal_q8", RopeStyle::normal, 1, 96, 20, SlabType::q8_0},
    {"neox_q8", RopeStyle::neox, 4, 16, 16, SlabType::q8_0},
};

TEST(MemoryRehydrate, ArenaTargetIsBitIdenticalToDenseThenCopy) {
  test::ScratchDir dir;
  ThreadPool pool(3);
  for (const StoreCase& sc : kStoreCases) {
    const RotaryDims r = RotaryDims::make(sc.style, sc.n_heads, sc.head_dim, sc.n_rot, 1e6);
    const RotationTable table(r);
    const uint32_t L = 3, D = r.row_dim(), hd = sc.head_dim;
    StoreGeometry g;
    g.num_layers = L;
    g.hidden_size = 16;
    g.kv_dim = D;
    g.max_episodes = 4;
    g.max_tokens = 40;
    g.slab_type = sc.slab;
    StoreOptions o;
    o.durable = false;
    EpisodicStore store = EpisodicStore::create(dir.file(std::string(sc.name) + ".mem"), g, 1, o);
    for (size_t n : {1u, 7u, 33u}) {
      const test::SyntheticEpisode ep(store.layout(), n, n);
      const uint64_t id = store.append(ep.record(1000));
      for (double delta : {0.0, -977.0, 5e5, 0.5}) {
        // Two-step: dense [L][n][D], then the copy inject_recall makes into arenas.
        std::vector<float> k(L * n * D), v(k.size());
        store.rehydrate(id, {&r, 1}, delta, k.data(), v.data());
        const uint32_t n_slots = 50, first = 9;
        const size_t arena = size_t{sc.n_heads} * n_slots * hd;  // [n_heads][n_slots][hd]
        std::vector<std::vector<float>> want_k(L, std::vector<float>(arena, kSentinel));
        std::vector<std::vector<float>> want_v = want_k;
        for (uint32_t l = 0; l < L; ++l)
          for (size_t t = 0; t < n; ++t)
            for (uint32_t h = 0; h < sc.n_heads; ++h) {
              const size_t src = (l * n + t) * D + h * hd, dst = (h * n_slots + first + t) * hd;
              std::memcpy(&want_k[l][dst], &k[src], hd * sizeof(float));
              std::memcpy(&want_v[l][dst], &v[src], hd * sizeof(float));
            }
        // Fused: straight into the arenas, plain / with the table / split over a pool.
        for (int mode = 0; mode < 3; ++mode) {
          std::vector<std::vector<float>> got_k(L, std::vector<float>(arena, kSentinel));
          std::vector<std::vector<float>> got_v = got_k;
          std::vector<float*> kp, vp;
          for (uint32_t l = 0; l < L; ++l) {
            kp.push_back(got_k[l].data());
            vp.push_back(got_v[l].data());
          }
          RehydrateOptions ro;
          if (mode >= 1) ro.tables = {&table, 1};
          if (mode == 2) ro.pool = &pool;
          store.rehydrate(id, {&r, 1}, delta,
                          slot_arena_rows(kp, vp, n_slots, hd, first, static_cast<uint32_t>(n)),
                          ro);
          if (mode == 0 || delta != std::floor(delta)) {  // same angles as the dense call
            for (uint32_t l = 0; l < L; ++l) {
              ASSERT_EQ(0, std::memcmp(got_k[l].data(), want_k[l].data(), arena * 4))
                  << sc.name << " n=" << n << " delta=" << delta << " layer " << l;
              ASSERT_EQ(0, std::memcmp(got_v[l].data(), want_v[l].data(), arena * 4));
            }
          } else {  // composed angles: the same to f32 rounding
            for (uint32_t l = 0; l < L; ++l) {
              ASSERT_EQ(0, std::memcmp(got_v[l].data(), want_v[l].data(), arena * 4));
              for (size_t i = 0; i < arena; ++i)
                ASSERT_NEAR(got_k[l][i], want_k[l][i], 1e-6f * (1.0f + std::fabs(want_k[l][i])))
                    << sc.name << " n=" << n << " delta=" << delta << " mode " << mode;
            }
          }
        }
      }
    }
  }
}

// Into an f16 recall tier: the dense f32 result rounded to f16, bit for bit, whether read
// through the mapping or with preadv (several batches of planes for large rows), verified or
// not, serial or over a pool, and after its pages were dropped; only the episode's rows are
// written.
TEST(MemoryRehydrate, F16TargetIsDenseRoundedToF16) {
  test::ScratchDir dir;
  ThreadPool pool(3);
  std::vector<StoreCase> cases(std::begin(kStoreCases), std::end(kStoreCases));
  cases.push_back({"wide_rows_f16", RopeStyle::neox, 8, 128, 128, SlabType::f16});
  for (const StoreCase& sc : cases) {
    const RotaryDims r = RotaryDims::make(sc.style, sc.n_heads, sc.head_dim, sc.n_rot, 1e6);
    const RotationTable table(r);
    const uint32_t L = 3, D = r.row_dim();
    StoreGeometry g;
    g.num_layers = L;
    g.hidden_size = 16;
    g.kv_dim = D;
    g.max_episodes = 4;
    g.max_tokens = 40;
    g.slab_type = sc.slab;
    StoreOptions o;
    o.durable = false;
    EpisodicStore store = EpisodicStore::create(dir.file(std::string(sc.name) + "16.mem"), g, 1, o);
    for (size_t n : {1u, 7u, 40u}) {
      const test::SyntheticEpisode ep(store.layout(), n, n);
      const uint64_t id = store.append(ep.record(1000));
      for (double delta : {0.0, -977.0, 5e5}) {
        std::vector<float> k(L * n * D), v(k.size());
        DenseKvRows dense(k.data(), v.data(), L, n, D, r.head_dim);
        RehydrateOptions dro;
        dro.tables = {&table, 1};
        store.rehydrate(id, {&r, 1}, delta, dense.target(), dro);
        const uint32_t first = 3, rows = 45;    // the tier holds 45 rows; the episode from row 3
        for (int mode = 0; mode < 7; ++mode) {  // 6: after evict_pages (cold where it can be)
          std::vector<std::vector<uint16_t>> tk(L, std::vector<uint16_t>(rows * D, 0x7bad));
          std::vector<std::vector<uint16_t>> tv = tk;
          std::vector<uint16_t*> kp, vp;
          for (uint32_t l = 0; l < L; ++l) {
            kp.push_back(tk[l].data() + first * D);
            vp.push_back(tv[l].data() + first * D);
          }
          RehydrateOptions ro;
          ro.tables = {&table, 1};
          ro.verify = mode == 0 || mode == 3;
          ro.always_pread = mode >= 2 && mode < 6;
          if (mode % 2 == 1) ro.pool = &pool;
          if (mode == 6) store.evict_pages(id);
          store.rehydrate(id, {&r, 1}, delta, KvRowsF16{kp, vp, D, rows - first}, ro);
          for (uint32_t l = 0; l < L; ++l)
            for (size_t i = 0; i < rows * D; ++i) {
              const bool inside = i >= first * D && i < (first + n) * D;
              const size_t at = l * n * D + i - first * D;
              ASSERT_EQ(tk[l][i], inside ? fp32_to_fp16(k[at]) : 0x7bad)
                  << sc.name << " n=" << n << " delta=" << delta << " mode " << mode << " l" << l
                  << " i" << i;
              ASSERT_EQ(tv[l][i], inside ? fp32_to_fp16(v[at]) : 0x7bad) << sc.name;
            }
        }
      }
    }
    // Wrong row size or too few rows: refused, nothing written.
    const uint64_t id = store.total_episodes() - 1;
    std::vector<uint16_t> buf(L * 40 * D, 0x7bad);
    std::vector<uint16_t*> kp = {buf.data(), buf.data(), buf.data()};
    EXPECT_THROW(store.rehydrate(id, {&r, 1}, 1.0, KvRowsF16{kp, kp, D + 1, 40}), Error);
    EXPECT_THROW(store.rehydrate(id, {&r, 1}, 1.0, KvRowsF16{kp, kp, D, 39}), Error);
    for (uint16_t x : buf) ASSERT_EQ(x, 0x7bad);
  }
}

TEST(MemoryRehydrate, BadTargetsAreRefused) {
  test::ScratchDir dir;
  const RotaryDims r = RotaryDims::make(RopeStyle::neox, 2, 8, 8, 1e4);
  StoreGeometry g;
  g.num_layers = 2;
  g.hidden_size = 8;
  g.kv_dim = 16;
  g.max_episodes = 2;
  g.max_tokens = 8;
  StoreOptions o;
  o.durable = false;
  EpisodicStore store = EpisodicStore::create(dir.file("bad.mem"), g, 1, o);
  const test::SyntheticEpisode ep(store.layout(), 1, 5);
  const uint64_t id = store.append(ep.record());
  std::vector<float> k(2 * 5 * 16, kSentinel), v(k.size(), kSentinel);
  std::vector<float*> kp = {k.data(), k.data() + 80}, vp = {v.data(), v.data() + 80};
  KvRowTarget t{kp, vp, 0, 16, 8, 4};  // holds 4 rows, the episode has 5
  EXPECT_THROW(store.rehydrate(id, {&r, 1}, 3.0, t), Error);
  t.max_tokens = 5;
  t.k = std::span<float* const>(kp.data(), 1);  // one layer for two
  EXPECT_THROW(store.rehydrate(id, {&r, 1}, 3.0, t), Error);
  t.k = kp;
  const RotationTable wrong(RotaryDims::make(RopeStyle::neox, 2, 8, 8, 500.0));
  RehydrateOptions ro;
  ro.tables = {&wrong, 1};
  EXPECT_THROW(store.rehydrate(id, {&r, 1}, 3.0, t, ro), Error);
  for (float x : k) EXPECT_EQ(x, kSentinel);  // nothing written
  EXPECT_THROW(store.rehydrate(id + 7, {&r, 1}, 3.0, t), Error);
  store.rehydrate(id, {&r, 1}, 3.0, t);
}

// --- into a live session -----------------------------------------------------------------

std::shared_ptr<const Model> micro_model(int layers) {
  RandomModelSpec s;
  s.hidden = 32;
  s.layers = layers;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 16;
  s.ffn = 48;
  s.vocab = 300;
  ThreadPool pool(1);
  GgufWriter w;
  write_random_model(s, w, pool);
  auto bytes = std::make_shared<std::vector<uint8_t>>(w.to_bytes());
  auto m = Model::load_from_memory(*bytes, "micro.gguf");
  return std::shared_ptr<const Model>(m.get(), [m, bytes](const Model*) {});
}

RingSessionConfig small_geometry() {
  RingSessionConfig c;
  c.ring = RingConfig{96, 32, 0, 0};
  c.n_threads = 1;
  c.n_batch = 8;
  return c;
}

TEST(MemoryRehydrate, SessionFusedRecallEqualsTwoStepInject) {
  const auto model = micro_model(2);
  test::ScratchDir dir;
  StoreOptions o;
  o.durable = false;
  EpisodicStore store = EpisodicStore::create(
      dir.file("s.mem"), session_store_geometry(*model, 8, 16), model_id_hash(model->gguf()), o);
  std::vector<uint64_t> ids;
  for (size_t n : {5u, 16u}) {
    const test::SyntheticEpisode ep(store.layout(), 40 + n, n);
    ids.push_back(store.append(ep.record(300)));
  }
  const std::vector<int32_t> anchors = {2, 40, 41, 42};
  RingSession fused(model, small_geometry()), twostep(model, small_geometry());
  for (RingSession* s : {&fused, &twostep}) {
    s->append(SpanType::system, anchors);
    s->seal();
  }
  MemoryConfig mc;
  mc.consolidate = false;
  MemoryAttachment mem(fused, store, mc);  // recall() is the fused path
  const ModelHparams& hp = model->hparams();
  RotaryDims r;
  r.style = fused.rope_global().style;
  r.head_dim = static_cast<uint32_t>(hp.head_dim);
  r.n_heads = static_cast<uint32_t>(hp.n_head_kv);
  r.n_rot = fused.rope_global().n_rot;
  r.inv_freq = fused.rope_global().inv_freq;
  const RotationTable table(r);
  for (uint64_t id : ids) {
    const RecallResult res = mem.recall(id);
    const uint32_t n = res.n_tokens;
    const double delta = static_cast<double>(res.stored_pos) - 300.0;
    const size_t values = fused.global_layers().size() * size_t{n} * r.row_dim();
    std::vector<float> k(values), v(values);
    DenseKvRows dense(k.data(), v.data(), static_cast<uint32_t>(fused.global_layers().size()), n,
                      r.row_dim(), r.head_dim);
    RehydrateOptions ro;
    ro.tables = {&table, 1};
    store.rehydrate(id, {&r, 1}, delta, dense.target(), ro);
    EXPECT_EQ(twostep.inject_recall(id, n, res.stored_pos, k, v), res.slot_begin);
  }
  for (int il : fused.global_layers()) {
    const auto a = fused.layer_k(il), b = twostep.layer_k(il);
    ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size_bytes())) << "K layer " << il;
    const auto c = fused.layer_v(il), d = twostep.layer_v(il);
    ASSERT_EQ(0, std::memcmp(c.data(), d.data(), c.size_bytes())) << "V layer " << il;
    const auto rk = fused.recall_k(il), rk2 = twostep.recall_k(il);
    ASSERT_EQ(0, std::memcmp(rk.data(), rk2.data(), rk.size_bytes())) << "recall K " << il;
    const auto rv = fused.recall_v(il), rv2 = twostep.recall_v(il);
    ASSERT_EQ(0, std::memcmp(rv.data(), rv2.data(), rv.size_bytes())) << "recall V " << il;
  }
  const std::vector<int32_t> next = {50, 51, 52};
  const auto la = fused.append(SpanType::user, next);
  const std::vector<float> fa(la.begin(), la.end());
  const auto lb = twostep.append(SpanType::user, next);
  EXPECT_EQ(fa, std::vector<float>(lb.begin(), lb.end()));
}

// A geometry without recall slots has no f16 tier, and an empty tier changes nothing: the
// same tokens give the same logits with 0 and with 32 recall slots.
TEST(MemoryRehydrate, EmptyRecallTierChangesNothing) {
  const auto model = micro_model(2);
  RingSessionConfig none = small_geometry(), some = small_geometry();
  none.ring.n_recall = 0;
  RingSession a(model, none), b(model, some);
  for (RingSession* s : {&a, &b}) {
    s->append(SpanType::system, std::vector<int32_t>{2, 40, 41, 42});
    s->seal();
  }
  for (int i = 0; i < 4; ++i) {
    const std::vector<int32_t> t = {50 + i, 60 + i, 70 + i};
    const auto la = a.append(SpanType::user, t);
    const std::vector<float> fa(la.begin(), la.end());
    const auto lb = b.append(SpanType::user, t);
    ASSERT_EQ(fa, std::vector<float>(lb.begin(), lb.end())) << i;
  }
  for (int il : a.global_layers()) EXPECT_TRUE(a.recall_k(il).empty());
  EXPECT_THROW(a.inject_recall(1, 1, 4, [](const KvRowsF16&) {}), Error);
}

TEST(MemoryRehydrate, FailingFillLeavesNoEpisodeActive) {
  const auto model = micro_model(1);
  RingSession s(model, small_geometry());
  const std::vector<int32_t> anchors = {2, 40, 41, 42};
  s.append(SpanType::system, anchors);
  s.seal();
  const uint32_t used = s.ring().recall_used();
  EXPECT_THROW(s.inject_recall(7, 4, 4, [](const KvRowsF16&) { throw Error("damaged"); }), Error);
  EXPECT_EQ(s.ring().recall_used(), used);
  EXPECT_TRUE(s.ring().recall_episodes().empty());
  // The id can be activated afterwards.
  const size_t values = s.global_layers().size() * 4 * model->hparams().n_head_kv *
                        static_cast<size_t>(model->hparams().head_dim);
  std::vector<float> k(values, 0.5f), v(values, 0.25f);
  EXPECT_NO_THROW(s.inject_recall(7, 4, 4, k, v));
  EXPECT_EQ(s.ring().recall_episodes().size(), 1u);
}

}  // namespace
}  // namespace channel
