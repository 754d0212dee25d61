// Every SIMD variant of a kernel family that this build compiled and this CPU executes
// (AVX-512, AVX2, scalar; backend/cpu/simd.h), against the family's scalar reference at
// awkward sizes and misaligned starts: slot attention, the memory kernels, the layer
// kernels, the bounded group kernel (simd_bounded_checks.h) and the matmul family (row,
// block-type and matmul kernels: simd_matmul_checks.h). One parameterised test: the parameter is
// (family, variant), so `--gtest_filter='*avx2*'` runs the AVX2 variants alone.
#include <algorithm>
#include <numeric>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/layer_kernels.h"
#include "backend/cpu/simd.h"
#include "kv/slot_attention.h"
#include "simd_bounded_checks.h"
#include "simd_matmul_checks.h"
#include "memory/memory_kernels.h"
#include "memory/rehydrate_kernels.h"
#include "memory/retrieval_kernels.h"
#include "ops/activation.h"
#include "ops/fp16.h"
#include "ops/norm.h"

namespace channel {
namespace {

struct Variant {
  std::string family;
  std::string isa;
  size_t index;  // into the family's variant list
};

std::vector<Variant> all_variants() {
  std::vector<Variant> out;
  const auto attn = slot_attention_variants();
  for (size_t i = 0; i < attn.size(); ++i) out.push_back({"slot_attention", attn[i].isa, i});
  const Int8DotsVariant* dots = nullptr;
  const size_t n_dots = int8_dots_variants(&dots);
  for (size_t i = 0; i < n_dots; ++i) out.push_back({"int8_dots", dots[i].isa, i});
  const auto centroid = centroid_kernel_variants();
  for (size_t i = 0; i < centroid.size(); ++i)
    out.push_back({"centroid", centroid[i].isa, i});
  const auto retrieval = retrieval_kernel_variants();
  for (size_t i = 0; i < retrieval.size(); ++i)
    out.push_back({"retrieval", retrieval[i].isa, i});
  const auto rehydrate = rehydrate_kernel_variants();
  for (size_t i = 0; i < rehydrate.size(); ++i)
    out.push_back({"rehydrate", rehydrate[i].isa, i});
  const auto layer = layer_kernel_variants();
  for (size_t i = 0; i < layer.size(); ++i) out.push_back({"layer", layer[i].isa, i});
  const auto bounded = cpu::bounded_kernel_variants();
  for (size_t i = 0; i < bounded.size(); ++i) out.push_back({"bounded", bounded[i].isa, i});
  const auto vec = cpu::vec_kernel_variants();
  for (size_t i = 0; i < vec.size(); ++i) out.push_back({"vec", vec[i].isa, i});
  const auto quant = cpu::quant_kernel_variants();
  for (size_t i = 0; i < quant.size(); ++i) out.push_back({"quant", quant[i].isa, i});
  const auto matmul = cpu::matmul_kernel_variants();
  for (size_t i = 0; i < matmul.size(); ++i) out.push_back({"matmul", matmul[i].isa, i});
  return out;
}

class SimdVariant : public ::testing::TestWithParam<Variant> {};

std::vector<float> random_floats(size_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// slot_attention: head dims 1..67 (tails of every width), 1-40 keys in up to 3 runs, arena
// rows starting at an odd float, and f16 recall rows beside the arena.
void check_slot_attention(const SlotAttentionVariant& variant) {
  std::mt19937 rng(17);
  SlotAttnScratch scratch;
  for (uint32_t hd : {1u, 3u, 7u, 8u, 15u, 16u, 17u, 31u, 33u, 64u, 67u}) {
    for (uint32_t n_keys : {1u, 5u, 17u, 40u}) {
      for (const bool neox : {false, true}) {
        const uint32_t n_head = 4, n_kv = 2, n_slots = 48, n_recall = 6;
        const SlotAttnShape shape{n_head, n_kv, hd, n_slots};
        const uint32_t n_rot = hd % 2 == 0 ? hd : hd - 1;
        if (n_rot == 0) continue;
        const RopeFreqs rope =
            RopeFreqs::make(neox ? RopeStyle::neox : RopeStyle::normal, n_rot, 10000.0);
        const std::vector<float> q = random_floats(size_t{n_head} * hd, rng, -2.0f, 2.0f);
        const std::vector<float> k = random_floats(size_t{n_kv} * n_slots * hd + 1, rng);
        const std::vector<float> v = random_floats(size_t{n_kv} * n_slots * hd + 1, rng);
        std::vector<uint16_t> rk(size_t{n_recall} * n_kv * hd), rv(rk.size());
        for (auto& x : rk) x = fp32_to_fp16(std::uniform_real_distribution<float>(-1, 1)(rng));
        for (auto& x : rv) x = fp32_to_fp16(std::uniform_real_distribution<float>(-1, 1)(rng));
        const RecallRowsF16 recall{rk.data(), rv.data(), n_slots, n_recall, size_t{n_kv} * hd};
        // Keys: arena slots and recall slots, shuffled, cut into up to 3 runs.
        std::vector<uint32_t> slots;
        for (uint32_t s = 0; s < n_slots + n_recall; ++s) slots.push_back(s);
        std::shuffle(slots.begin(), slots.end(), rng);
        slots.resize(n_keys);
        std::vector<SlotRun> runs;
        const uint32_t cut = n_keys / 3;
        if (cut > 0) {
          runs.push_back({slots.data(), cut, 1234.0});
          runs.push_back({slots.data() + cut, cut, 77.0});
        }
        runs.push_back({slots.data() + 2 * cut, n_keys - 2 * cut, 3000001.0});
        const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
        std::vector<float> want(size_t{n_head} * hd), got(want.size(), -1.0f);
        slot_attention_ref(shape, rope, q.data(), k.data() + 1, v.data() + 1, runs, scale,
                           want.data(), recall);
        check_slot_attn_shape(shape, rope);
        check_recall_rows(shape, recall);
        variant.fn(shape, rope, q.data(), k.data() + 1, v.data() + 1, runs, scale, got.data(),
                   scratch, recall);
        for (size_t i = 0; i < want.size(); ++i)
          ASSERT_NEAR(got[i], want[i], 2e-5f * (1.0f + std::fabs(want[i])))
              << variant.isa << " hd " << hd << " keys " << n_keys << " neox " << neox
              << " at " << i;
      }
    }
  }
}

// int8_dots: exact, so every variant equals the reference bit for bit.
void check_int8_dots(const Int8DotsVariant& variant) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> q8(-127, 127);
  for (size_t dim : {1, 3, 7, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 1000}) {
    for (size_t off : {0, 1, 3}) {
      const size_t n = 5, stride = dim + off + 7;
      std::vector<int8_t> rows(stride * n + off), q(dim);
      for (auto& x : rows) x = static_cast<int8_t>(q8(rng));
      for (auto& x : q) x = static_cast<int8_t>(q8(rng));
      std::vector<int32_t> want(n), got(n, -1);
      int8_dots_ref(rows.data() + off, stride, n, q.data(), dim, want.data());
      variant.fn(rows.data() + off, stride, n, q.data(), dim, got.data());
      ASSERT_EQ(got, want) << variant.isa << " dim " << dim << " off " << off;
    }
  }
}

// centroid_dots (f16 rows . f32 query, and the rows' squared norms) at every tail width and
// misaligned rows and query; f32_to_f16_row, exact, bit for bit, subnormals to overflow.
void check_centroid(const CentroidKernels& variant) {
  std::mt19937 rng(2);
  std::normal_distribution<float> nd;
  for (size_t off : {0, 2, 6}) {
    for (size_t dim : {1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 63, 65, 127, 129, 1000}) {
      const size_t n_rows = 5, stride = off + 2 * dim + 10;
      std::vector<uint8_t> rows(stride * n_rows + 64);
      std::vector<float> q(dim + 1);
      for (auto& x : q) x = nd(rng);
      for (size_t r = 0; r < n_rows; ++r)
        for (size_t i = 0; i < dim; ++i) {
          const uint16_t h = fp32_to_fp16(nd(rng));
          std::memcpy(rows.data() + off + r * stride + 2 * i, &h, 2);
        }
      std::vector<float> d(n_rows), n2(n_rows), dr(n_rows), n2r(n_rows);
      const float* qp = q.data() + (off ? 1 : 0);
      variant.centroid_dots(rows.data() + off, stride, n_rows, qp, dim, d.data(), n2.data());
      centroid_dots_ref(rows.data() + off, stride, n_rows, qp, dim, dr.data(), n2r.data());
      for (size_t r = 0; r < n_rows; ++r) {
        const float tol = 1e-5f * static_cast<float>(dim) + 1e-5f;
        ASSERT_NEAR(d[r], dr[r], tol * (1 + std::abs(dr[r]))) << variant.isa << " dim " << dim;
        ASSERT_NEAR(n2[r], n2r[r], tol * (1 + n2r[r])) << variant.isa << " dim " << dim;
      }
    }
  }
  std::vector<float> x(2000);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = nd(rng) * std::pow(10.0f, static_cast<float>(static_cast<int>(i % 13)) - 8.0f) *
           (i % 17 == 0 ? 1e5f : 1.0f);
  for (size_t off : {0, 1, 3})
    for (size_t n : {0, 1, 7, 8, 9, 15, 16, 17, 33, 1000}) {
      std::vector<uint16_t> a(n + 1), b(n + 1);
      variant.f32_to_f16_row(x.data() + off, a.data() + off % 2, n);
      f32_to_f16_row_ref(x.data() + off, b.data() + off % 2, n);
      ASSERT_EQ(a, b) << variant.isa << " n " << n << " off " << off;
    }
}

// The retrieval scans (f16 rows . f32 queries): key_match_score over blocks, query heads and
// representative keys, proj_max_score over rows, at every tail width, misaligned starts, and
// a dim past the stack buffer (the reference's path).
void check_retrieval(const RetrievalKernels& variant) {
  std::mt19937 rng(23);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const auto f32 = [&](size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = nd(rng);
    return v;
  };
  const auto f16 = [&](size_t n) {
    std::vector<uint16_t> v(n);
    for (uint16_t& x : v) x = fp32_to_fp16(nd(rng));
    return v;
  };
  for (size_t dim : {1, 3, 7, 8, 15, 16, 17, 31, 33, 64, 65, 130, 1030}) {
    const float tol = 1e-4f * std::sqrt(static_cast<float>(dim));
    for (size_t group : {1, 2, 3}) {
      for (size_t R : {1, 2, 9}) {
        const size_t blocks = 1 + rng() % 3;
        const auto q = f32(blocks * group * dim + 1);  // +1: misaligned starts
        const auto k = f16(blocks * R * dim + 1);
        const float ref = key_match_score_ref(q.data() + 1, k.data() + 1, blocks, group, R, dim);
        const float got = variant.key_match_score(q.data() + 1, k.data() + 1, blocks, group, R, dim);
        ASSERT_NEAR(got, ref, tol * (1.0f + std::abs(ref)))
            << variant.isa << " dim " << dim << " group " << group << " R " << R;
      }
    }
    for (size_t n : {1, 5, 17}) {
      const auto c = f32(dim + 1);
      const auto e = f16(n * dim + 1);
      const float ref = proj_max_score_ref(c.data() + 1, e.data() + 1, n, dim);
      const float got = variant.proj_max_score(c.data() + 1, e.data() + 1, n, dim);
      ASSERT_NEAR(got, ref, tol * (1.0f + std::abs(ref))) << variant.isa << " dim " << dim;
    }
  }
}

// The rehydration kernels, bit for bit: rows (f16 and f32 sources, f32 and f16 outputs, in
// place too) rotated NORMAL and NEOX over all or part of awkward head dims, into a strided
// layout at a misaligned start; and the f64 rotation algebra at every tail width.
void check_rehydrate(const RehydrateKernels& variant) {
  std::mt19937 rng(29);
  std::uniform_real_distribution<double> ang(-3.0, 3.0);
  for (uint32_t hd : {2u, 6u, 8u, 16u, 18u, 34u, 64u, 66u}) {
    for (const bool neox : {false, true}) {
      for (uint32_t n_rot : {hd, hd - 2}) {
        if (n_rot == 0) continue;
        const uint32_t n_heads = 3;
        const size_t n = 5, row = size_t{n_heads} * hd;
        std::vector<double> cd(n_rot / 2), sd(n_rot / 2);
        for (size_t i = 0; i < cd.size(); ++i) {
          const double a = ang(rng);
          cd[i] = std::cos(a);
          sd[i] = std::sin(a);
        }
        std::vector<float> c(n_rot), s(n_rot), c2(n_rot), s2(n_rot);
        variant.expand_rotation(neox, n_rot, cd.data(), sd.data(), c.data(), s.data());
        expand_rotation_ref(neox, n_rot, cd.data(), sd.data(), c2.data(), s2.data());
        ASSERT_EQ(c, c2) << variant.isa << " expand hd " << hd;
        ASSERT_EQ(s, s2) << variant.isa << " expand hd " << hd;
        const HeadRotation rot{neox, n_rot, c.data(), s.data()};
        const std::vector<float> xf = random_floats(n * row + 1, rng, -4.0f, 4.0f);
        std::vector<uint16_t> xh(n * row + 1);
        for (size_t i = 0; i < xh.size(); ++i) xh[i] = fp32_to_fp16(xf[i]);
        const RowLayout out{n_heads, hd, row + 7, size_t{hd} + 2, false};
        for (const HeadRotation* r : {&rot, static_cast<const HeadRotation*>(nullptr)}) {
          std::vector<float> a(n * out.token_stride + 1), b(a.size());
          variant.f16_rows_to_f32(r, xh.data() + 1, n, out, a.data() + 1);
          f16_rows_to_f32_ref(r, xh.data() + 1, n, out, b.data() + 1);
          ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
              << variant.isa << " f16 rows hd " << hd << " n_rot " << n_rot << " neox " << neox;
          variant.f32_rows_to_f32(r, xf.data() + 1, n, out, a.data() + 1);
          f32_rows_to_f32_ref(r, xf.data() + 1, n, out, b.data() + 1);
          ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
              << variant.isa << " f32 rows hd " << hd << " n_rot " << n_rot << " neox " << neox;
          std::vector<uint16_t> h1(xh), h2(n * row + 1);
          variant.f16_rows_to_f16(r, h1.data() + 1, n, n_heads, hd, h1.data() + 1);  // in place
          f16_rows_to_f16_ref(r, xh.data() + 1, n, n_heads, hd, h2.data() + 1);
          h2[0] = xh[0];
          ASSERT_EQ(h1, h2) << variant.isa << " f16 -> f16 hd " << hd << " n_rot " << n_rot;
        }
      }
    }
  }
  for (size_t n : {1, 3, 7, 8, 9, 16, 17, 33}) {
    std::vector<double> c(n), s(n), C(n), S(n), C2(n), S2(n);
    for (size_t i = 0; i < n; ++i) {
      c[i] = std::cos(ang(rng)), s[i] = std::sin(ang(rng));
      C[i] = std::cos(ang(rng)), S[i] = std::sin(ang(rng));
      C2[i] = std::cos(ang(rng)), S2[i] = std::sin(ang(rng));
    }
    std::vector<double> c1(c), s1(s), cr(c), sr(s);
    variant.compose_rotations(c1.data(), s1.data(), C.data(), S.data(), n);
    compose_rotations_ref(cr.data(), sr.data(), C.data(), S.data(), n);
    ASSERT_EQ(c1, cr) << variant.isa << " compose n " << n;
    ASSERT_EQ(s1, sr) << variant.isa << " compose n " << n;
    const double* Cs[] = {c.data(), C.data(), C2.data()};
    const double* Ss[] = {s.data(), S.data(), S2.data()};
    std::vector<double> oc(n), os(n), rc(n), rs(n);
    variant.chain_rotations(Cs, Ss, 3, n, oc.data(), os.data());
    chain_rotations_ref(Cs, Ss, 3, n, rc.data(), rs.data());
    ASSERT_EQ(oc, rc) << variant.isa << " chain n " << n;
    ASSERT_EQ(os, rs) << variant.isa << " chain n " << n;
  }
}

// The layer kernels (backend/cpu/layer_kernels.h): rms_norm, silu_glu (gates out to +-95,
// where e^x clamps), gelu_tanh_glu (bit for bit) at every tail width and misaligned starts,
// in place too; attend over scattered slot lists with head dims of every tail.
void check_layer_kernels(const LayerKernels& variant) {
  std::mt19937 rng(31);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (int n : {1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 63, 65, 127, 129, 1152}) {
    for (int off : {0, 1, 5}) {
      const size_t size = static_cast<size_t>(n + off);
      std::vector<float> x(size), w(size), up(size);
      for (size_t i = 0; i < size; ++i) x[i] = nd(rng), w[i] = 1.0f + 0.1f * nd(rng), up[i] = nd(rng);
      if (n > 4) x[off] = -95.0f, x[off + 1] = 95.0f, x[off + 2] = -10.0f, x[off + 3] = 12.0f;
      std::vector<float> want(size), got(size), in_place(x);
      rms_norm_ref(x.data() + off, w.data() + off, n, 1e-6f, want.data() + off);
      variant.rms_norm(x.data() + off, w.data() + off, n, 1e-6f, got.data() + off);
      for (size_t i = static_cast<size_t>(off); i < size; ++i)
        ASSERT_NEAR(got[i], want[i], 1e-6f * std::abs(want[i]) + 1e-7f)
            << variant.isa << " rms_norm n " << n << " off " << off;
      variant.rms_norm(in_place.data() + off, w.data() + off, n, 1e-6f, in_place.data() + off);
      ASSERT_EQ(0, std::memcmp(in_place.data() + off, got.data() + off, sizeof(float) * n))
          << variant.isa << " rms_norm in place n " << n;
      silu_glu_ref(x.data() + off, up.data() + off, n, want.data() + off);
      variant.silu_glu(x.data() + off, up.data() + off, n, got.data() + off);
      for (size_t i = static_cast<size_t>(off); i < size; ++i)
        ASSERT_NEAR(got[i], want[i], 2e-6f * std::abs(want[i]) + 1e-30f)
            << variant.isa << " silu_glu n " << n << " gate " << x[i];
      gelu_tanh_glu_ref(x.data() + off, up.data() + off, n, want.data() + off);
      variant.gelu_tanh_glu(x.data() + off, up.data() + off, n, got.data() + off);
      ASSERT_EQ(0, std::memcmp(want.data() + off, got.data() + off, sizeof(float) * n))
          << variant.isa << " gelu_tanh_glu n " << n << " off " << off;
    }
  }
  std::normal_distribution<float> unit;
  for (int hd : {1, 3, 7, 8, 15, 16, 17, 31, 32, 33, 64, 65, 256}) {
    for (int n_slots : {0, 1, 2, 5, 33, 100}) {
      const int capacity = n_slots + 5;
      std::vector<float> k(static_cast<size_t>(capacity * hd) + 1), v(k.size());  // +1: misaligned
      std::vector<float> q(static_cast<size_t>(hd));
      for (auto& e : k) e = unit(rng);
      for (auto& e : v) e = unit(rng);
      for (auto& e : q) e = unit(rng);
      std::vector<int32_t> slots(static_cast<size_t>(capacity));
      std::iota(slots.begin(), slots.end(), 0);
      std::shuffle(slots.begin(), slots.end(), rng);
      slots.resize(static_cast<size_t>(n_slots));
      const AttentionHead head{k.data() + 1, v.data() + 1, hd, hd};
      std::vector<float> scores(slots.size() + 1), want(q.size()), got(q.size(), -1.0f);
      const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
      attend_ref(q.data(), head, slots, scale, scores.data(), want.data());
      variant.attend(q.data(), head, slots, scale, scores.data(), got.data());
      for (size_t d = 0; d < q.size(); ++d)
        ASSERT_NEAR(got[d], want[d], 1e-5f) << variant.isa << " attend hd " << hd << " slots "
                                            << n_slots;
    }
  }
}

TEST_P(SimdVariant, MatchesTheScalarReference) {
  const Variant& p = GetParam();
  if (p.family == "slot_attention") {
    check_slot_attention(slot_attention_variants()[p.index]);
  } else if (p.family == "centroid") {
    check_centroid(centroid_kernel_variants()[p.index]);
  } else if (p.family == "rehydrate") {
    check_rehydrate(rehydrate_kernel_variants()[p.index]);
  } else if (p.family == "retrieval") {
    check_retrieval(retrieval_kernel_variants()[p.index]);
  } else if (p.family == "layer") {
    check_layer_kernels(layer_kernel_variants()[p.index]);
  } else if (p.family == "bounded") {
    simd_checks::check_bounded_kernels(cpu::bounded_kernel_variants()[p.index]);
  } else if (p.family == "vec") {
    simd_checks::check_vec_kernels(cpu::vec_kernel_variants()[p.index]);
  } else if (p.family == "quant") {
    simd_checks::check_quant_kernels(cpu::quant_kernel_variants()[p.index]);
  } else if (p.family == "matmul") {
    simd_checks::check_matmul_kernels(cpu::matmul_kernel_variants()[p.index]);
  } else if (p.family == "int8_dots") {
    const Int8DotsVariant* dots = nullptr;
    int8_dots_variants(&dots);
    check_int8_dots(dots[p.index]);
  } else {
    FAIL() << "no check for family " << p.family;
  }
}

INSTANTIATE_TEST_SUITE_P(AllVariants, SimdVariant, ::testing::ValuesIn(all_variants()),
                         [](const ::testing::TestParamInfo<Variant>& info) {
                           return info.param.family + "_" + info.param.isa;
                         });

// The dispatched variant is the first of its list, and on a CPU with AVX2 a build that can
// target it has it: the AVX2 path is compiled and tested even where AVX-512 is dispatched.
TEST(SimdVariants, TheBestVariantIsDispatchedAndAvx2IsThere) {
  struct Family {
    std::string name, dispatched;
    std::vector<std::string> isas;
  };
  const auto isas = [](const auto& variants) {
    std::vector<std::string> v;
    for (const auto& x : variants) v.push_back(x.isa);
    return v;
  };
  const std::vector<Family> families = {
      {"slot_attention", slot_attention_isa(), isas(slot_attention_variants())},
      {"retrieval", retrieval_kernels_isa(), isas(retrieval_kernel_variants())},
      {"rehydrate", rehydrate_kernels_isa(), isas(rehydrate_kernel_variants())},
      {"layer", layer_kernels_isa(), isas(layer_kernel_variants())},
      {"bounded", cpu::bounded_kernel_isa(), isas(cpu::bounded_kernel_variants())},
      {"vec", cpu::vec_kernels_isa(), isas(cpu::vec_kernel_variants())},
      {"quant", cpu::quant_kernels_isa(), isas(cpu::quant_kernel_variants())},
      {"matmul", cpu::matmul_kernels_isa(), isas(cpu::matmul_kernel_variants())}};
  for (const Family& f : families) {
    EXPECT_EQ(f.dispatched, f.isas.front()) << f.name;
    EXPECT_EQ(f.isas.back(), "scalar") << f.name;
#if defined(CHANNEL_SIMD_AVX2)
    if (simd::cpu_runs_avx2()) {
      EXPECT_NE(std::find(f.isas.begin(), f.isas.end(), "avx2"), f.isas.end()) << f.name;
    }
#endif
  }
  // The matmul family is dispatched as one: its loops call the same variant's row kernels.
  EXPECT_STREQ(cpu::matmul_kernels_isa(), cpu::vec_kernels_isa());
  EXPECT_STREQ(cpu::matmul_kernels_isa(), cpu::quant_kernels_isa());
}

}  // namespace
}  // namespace channel
