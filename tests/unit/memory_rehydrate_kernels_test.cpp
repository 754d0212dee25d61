// Rehydration kernels: the SIMD convert+rotate kernel and the f64 rotation composition are
// bit-identical to their scalar references at awkward sizes and misaligned starts; the
// references agree with rotate_rows and exact-angle sin/cos; RotationTable matches
// std::cos/sin.
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

}  // namespace
}  // namespace channel
