// Scalar references of ops/quant.h and fp16.h, and every compiled SIMD variant of
// backend/cpu/vec_kernels against them at awkward sizes and misaligned starts.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/simd.h"
#include "backend/cpu/vec_kernels.h"
#include "backend/cpu/vec_kernels_isa.h"
#include "ops/fp16.h"
#include "ops/quant.h"

namespace channel {
namespace {

constexpr int64_t kSizes[] = {1, 3, 7, 15, 17, 31, 33, 63, 65, 127, 129};

// One set of row kernels (the dispatched one, or one instruction-set variant).
struct Kernels {
  std::string name;
  void (*dequantize_row_f16)(const uint16_t*, float*, int64_t);
  void (*dequantize_row_bf16)(const uint16_t*, float*, int64_t);
  void (*dequantize_row_q8_0)(const void*, float*, int64_t);
  void (*dequantize_row_q4_0)(const void*, float*, int64_t);
  void (*quantize_row_q8_0)(const float*, void*, int64_t);
  void (*round_row_f16)(const float*, float*, int64_t);
  void (*round_row_bf16)(const float*, float*, int64_t);
  float (*dot_f32)(const float*, const float*, int64_t);
  float (*dot_f16)(const uint16_t*, const float*, int64_t);
  float (*dot_bf16)(const uint16_t*, const float*, int64_t);
  float (*dot_q8_0)(const void*, const void*, int64_t);
  float (*dot_q4_0)(const void*, const void*, int64_t);
};

#define CHANNEL_KERNELS(ns, label)                                                             \
  Kernels {                                                                                    \
    label, ns::dequantize_row_f16, ns::dequantize_row_bf16, ns::dequantize_row_q8_0,           \
        ns::dequantize_row_q4_0, ns::quantize_row_q8_0, ns::round_row_f16, ns::round_row_bf16, \
        ns::dot_f32, ns::dot_f16, ns::dot_bf16, ns::dot_q8_0, ns::dot_q4_0                     \
  }

std::vector<Kernels> all_kernels() {
  std::vector<Kernels> k = {CHANNEL_KERNELS(cpu, "dispatch")};
#if defined(CHANNEL_SIMD_AVX2)
  k.push_back(CHANNEL_KERNELS(cpu::avx2, "avx2"));
#endif
#if defined(CHANNEL_SIMD_VNNI)
  k.push_back(CHANNEL_KERNELS(cpu::avx512, "avx512"));
#endif
  return k;
}

std::vector<float> random_floats(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

// Random Q4_0 / Q8_0 weight bytes after `offset` padding bytes: any nibble / int8 (including
// -128), sane f16 scales.
std::vector<uint8_t> random_blocks(int64_t n_blocks, size_t block_bytes, uint32_t seed,
                                   int offset = 0) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(static_cast<size_t>(n_blocks) * block_bytes + offset);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  for (int64_t i = 0; i < n_blocks; ++i) {
    const uint16_t d = fp32_to_fp16(scale(rng));
    std::memcpy(v.data() + offset + i * block_bytes, &d, sizeof(d));
  }
  return v;
}

float dot_tolerance(const float* a, const float* b, int64_t n) {
  double mag = 0.0;
  for (int64_t i = 0; i < n; ++i) mag += std::fabs(static_cast<double>(a[i]) * b[i]);
  return static_cast<float>(1e-5 * mag + 1e-6);
}

// --- fp16 / bf16 ------------------------------------------------------------------------------

TEST(Fp16, RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = fp16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(f)))) << h;
    } else {
      EXPECT_EQ(fp32_to_fp16(f), h) << h;
    }
  }
}

TEST(Fp16, RoundsToNearestEven) {
  EXPECT_EQ(fp32_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(fp32_to_fp16(65519.0f), 0x7bff);             // below the halfway point to 65536
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);             // ties to even: overflows to inf
  EXPECT_EQ(fp32_to_fp16(1.0f + 0x1p-11f), 0x3c00);      // tie -> even (down)
  EXPECT_EQ(fp32_to_fp16(1.0f + 3 * 0x1p-11f), 0x3c02);  // tie -> even (up)
  EXPECT_EQ(fp32_to_fp16(0x1p-25f), 0x0000);             // half the smallest subnormal
  EXPECT_EQ(fp32_to_fp16(0x1.8p-25f), 0x0001);
  EXPECT_EQ(fp32_to_fp16(-0x1p-24f), 0x8001);
  EXPECT_EQ(fp32_to_fp16(0x1.ffcp-15f), 0x0400);  // rounds up into the smallest normal
  EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(fp32_to_fp16(std::nanf("")) & 0x7e00, 0x7e00);
}

#if defined(CHANNEL_SIMD_AVX2)  // F16C
TEST(Fp16, MatchesHardwareConversion) {
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    const float f = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    if (std::isnan(f)) continue;
    ASSERT_EQ(fp32_to_fp16(f), _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT)) << f;
  }
}
#endif

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie -> even (down)
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // tie -> even (up)
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x3f808001u)), 0x3f81);
  EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(std::nanf("")))));
  EXPECT_EQ(bf16_to_fp32(0xc040), -3.0f);
}

// --- references ---------------------------------------------------------------------------------

TEST(QuantRef, Q8_0RoundsTiesToEvenAndScalesByMax) {
  std::vector<float> x(kQK, 0.0f);
  x[0] = 127.0f;  // amax 127: id = 1, so x*id is exactly x
  x[1] = 2.5f;
  x[2] = 3.5f;
  x[3] = -2.5f;
  x[4] = -127.0f;
  BlockQ8_0 b;
  quantize_row_q8_0_ref(x.data(), &b, kQK);
  EXPECT_EQ(b.d, fp32_to_fp16(1.0f));
  EXPECT_EQ(b.qs[0], 127);
  EXPECT_EQ(b.qs[1], 2);
  EXPECT_EQ(b.qs[2], 4);
  EXPECT_EQ(b.qs[3], -2);
  EXPECT_EQ(b.qs[4], -127);
  std::vector<float> zeros(kQK, 0.0f);
  quantize_row_q8_0_ref(zeros.data(), &b, kQK);
  EXPECT_EQ(b.d, 0);
  for (int j = 0; j < kQK; ++j) EXPECT_EQ(b.qs[j], 0);
}

TEST(QuantRef, RoundTripsWithinHalfAStep) {
  const int64_t k = 4 * kQK;
  const auto x = random_floats(k, 3);
  std::vector<BlockQ8_0> q8(k / kQK);
  std::vector<BlockQ4_0> q4(k / kQK);
  std::vector<float> y8(k), y4(k);
  quantize_row_q8_0_ref(x.data(), q8.data(), k);
  quantize_row_q4_0_ref(x.data(), q4.data(), k);
  dequantize_row_q8_0_ref(q8.data(), y8.data(), k);
  dequantize_row_q4_0_ref(q4.data(), y4.data(), k);
  for (int64_t i = 0; i < k; ++i) {
    const float d8 = fp16_to_fp32(q8[i / kQK].d), d4 = std::fabs(fp16_to_fp32(q4[i / kQK].d));
    EXPECT_NEAR(y8[i], x[i], 0.5f * d8 + 1e-3f * std::fabs(x[i])) << i;
    EXPECT_NEAR(y4[i], x[i], d4 + 1e-3f * std::fabs(x[i])) << i;  // -max clamps to 7d
  }
}

TEST(QuantRef, Q4_0NibbleLayout) {
  BlockQ4_0 b;
  b.d = fp32_to_fp16(1.0f);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>((j & 0xf) | ((15 - j) << 4));
  std::vector<float> y(kQK);
  dequantize_row_q4_0_ref(&b, y.data(), kQK);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], static_cast<float>(j - 8));
    EXPECT_EQ(y[j + 16], static_cast<float>(7 - j));
  }
}

TEST(QuantRef, DotsMatchDequantizedFloatDots) {
  const int64_t k = 3 * kQK;
  const auto x = random_floats(k, 4);
  std::vector<BlockQ8_0> xq(k / kQK);
  quantize_row_q8_0_ref(x.data(), xq.data(), k);
  std::vector<float> xd(k);
  dequantize_row_q8_0_ref(xq.data(), xd.data(), k);
  for (size_t bb : {sizeof(BlockQ8_0), sizeof(BlockQ4_0)}) {
    const auto w = random_blocks(k / kQK, bb, 5);
    std::vector<float> wd(k);
    float got;
    if (bb == sizeof(BlockQ8_0)) {
      dequantize_row_q8_0_ref(w.data(), wd.data(), k);
      got = dot_q8_0_ref(w.data(), xq.data(), k / kQK);
    } else {
      dequantize_row_q4_0_ref(w.data(), wd.data(), k);
      got = dot_q4_0_ref(w.data(), xq.data(), k / kQK);
    }
    EXPECT_NEAR(got, dot_f32_ref(wd.data(), xd.data(), k), dot_tolerance(wd.data(), xd.data(), k));
  }
}

// --- SIMD variants against the references ------------------------------------------------------

class VecKernels : public ::testing::TestWithParam<Kernels> {};

TEST_P(VecKernels, FloatDotsAndConversions) {
  const Kernels& K = GetParam();
  for (int64_t n : kSizes) {
    for (int off = 0; off < 4; ++off) {
      SCOPED_TRACE("n=" + std::to_string(n) + " offset=" + std::to_string(off));
      const auto wf_all = random_floats(n + off, static_cast<uint32_t>(n * 8 + off));
      const auto xf_all = random_floats(n + off, static_cast<uint32_t>(n * 8 + off + 1000));
      std::vector<uint16_t> wh_all(n + off), wb_all(n + off);
      for (int64_t i = 0; i < n + off; ++i) {
        wh_all[i] = fp32_to_fp16(wf_all[i]);
        wb_all[i] = fp32_to_bf16(wf_all[i]);
      }
      const float* wf = wf_all.data() + off;
      const float* xf = xf_all.data() + off;
      const uint16_t* wh = wh_all.data() + off;
      const uint16_t* wb = wb_all.data() + off;

      std::vector<float> xh_all(n + off), xb_all(n + off);
      float* xh = xh_all.data() + off;
      float* xb = xb_all.data() + off;
      K.round_row_f16(xf, xh, n);
      K.round_row_bf16(xf, xb, n);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(xh[i], fp16_to_fp32(fp32_to_fp16(xf[i]))) << i;
        ASSERT_EQ(xb[i], bf16_to_fp32(fp32_to_bf16(xf[i]))) << i;
      }

      std::vector<float> got_all(n + off + 1, -7.0f), want(n);
      float* got = got_all.data() + off;
      K.dequantize_row_f16(wh, got, n);
      dequantize_row_f16_ref(wh, want.data(), n);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], want[i]) << i;
      EXPECT_EQ(got[n], -7.0f) << "wrote past the end";
      K.dequantize_row_bf16(wb, got, n);
      dequantize_row_bf16_ref(wb, want.data(), n);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], want[i]) << i;
      EXPECT_EQ(got[n], -7.0f) << "wrote past the end";

      std::vector<float> whf(n), wbf(n);
      dequantize_row_f16_ref(wh, whf.data(), n);
      dequantize_row_bf16_ref(wb, wbf.data(), n);
      EXPECT_NEAR(K.dot_f32(wf, xf, n), dot_f32_ref(wf, xf, n), dot_tolerance(wf, xf, n));
      EXPECT_NEAR(K.dot_f16(wh, xh, n), dot_f16_ref(wh, xh, n), dot_tolerance(whf.data(), xh, n));
      EXPECT_NEAR(K.dot_bf16(wb, xb, n), dot_bf16_ref(wb, xb, n), dot_tolerance(wbf.data(), xb, n));
    }
  }
}

TEST_P(VecKernels, QuantizedDotsAndConversions) {
  const Kernels& K = GetParam();
  for (int64_t nb : kSizes) {
    const int64_t k = nb * kQK;
    for (int off = 0; off < 4; ++off) {
      SCOPED_TRACE("blocks=" + std::to_string(nb) + " offset=" + std::to_string(off));
      // Activations: a float row (misaligned by `off` floats) quantized to misaligned bytes.
      const auto x_all = random_floats(k + off, static_cast<uint32_t>(nb * 4 + off), 2.0f);
      const float* x = x_all.data() + off;
      std::vector<uint8_t> xq_all(nb * sizeof(BlockQ8_0) + off), xq_ref(nb * sizeof(BlockQ8_0));
      uint8_t* xq = xq_all.data() + off;
      K.quantize_row_q8_0(x, xq, k);
      quantize_row_q8_0_ref(x, xq_ref.data(), k);
      ASSERT_EQ(std::memcmp(xq, xq_ref.data(), xq_ref.size()), 0) << "quantize_row_q8_0";
      std::vector<float> xd(k);
      dequantize_row_q8_0_ref(xq, xd.data(), k);

      const auto w8_all =
          random_blocks(nb, sizeof(BlockQ8_0), static_cast<uint32_t>(nb + off), off);
      const auto w4_all =
          random_blocks(nb, sizeof(BlockQ4_0), static_cast<uint32_t>(nb - off), off);
      const uint8_t* w8 = w8_all.data() + off;
      const uint8_t* w4 = w4_all.data() + off;
      std::vector<float> got_all(k + off + 1, -7.0f), want(k);
      float* got = got_all.data() + off;

      K.dequantize_row_q8_0(w8, got, k);
      dequantize_row_q8_0_ref(w8, want.data(), k);
      for (int64_t i = 0; i < k; ++i) ASSERT_EQ(got[i], want[i]) << i;
      EXPECT_EQ(got[k], -7.0f) << "wrote past the end";
      EXPECT_NEAR(K.dot_q8_0(w8, xq, nb), dot_q8_0_ref(w8, xq, nb),
                  dot_tolerance(want.data(), xd.data(), k));

      K.dequantize_row_q4_0(w4, got, k);
      dequantize_row_q4_0_ref(w4, want.data(), k);
      for (int64_t i = 0; i < k; ++i) ASSERT_EQ(got[i], want[i]) << i;
      EXPECT_EQ(got[k], -7.0f) << "wrote past the end";
      EXPECT_NEAR(K.dot_q4_0(w4, xq, nb), dot_q4_0_ref(w4, xq, nb),
                  dot_tolerance(want.data(), xd.data(), k));
    }
  }
}

TEST_P(VecKernels, QuantizeHandlesZeroAndExtremeBlocks) {
  const Kernels& K = GetParam();
  std::vector<float> x(3 * kQK, 0.0f);  // block 0 all zero
  x[kQK] = 1e-30f;                      // block 1: scale underflows to f16 zero
  for (int j = 0; j < kQK; ++j) x[2 * kQK + j] = (j % 2 ? -6e4f : 6e4f) * (j + 1) / kQK;
  std::vector<BlockQ8_0> got(3), want(3);
  K.quantize_row_q8_0(x.data(), got.data(), x.size());
  quantize_row_q8_0_ref(x.data(), want.data(), x.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), sizeof(BlockQ8_0) * 3), 0);
}

INSTANTIATE_TEST_SUITE_P(AllIsas, VecKernels, ::testing::ValuesIn(all_kernels()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace channel
