// Scalar references of ops/quant.h and fp16.h. Every SIMD variant of backend/cpu/vec_kernels
// is checked against them in simd_variants_test (simd_matmul_checks.h).
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/simd.h"
#include "ops/fp16.h"
#include "ops/quant.h"
#include "support/quant_fixtures.h"

namespace channel {
namespace {

using test::random_normal_floats;

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
  const auto x = random_normal_floats(k, 3);
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
  const auto x = random_normal_floats(k, 4);
  std::vector<BlockQ8_0> xq(k / kQK);
  quantize_row_q8_0_ref(x.data(), xq.data(), k);
  std::vector<float> xd(k);
  dequantize_row_q8_0_ref(xq.data(), xd.data(), k);
  for (size_t bb : {sizeof(BlockQ8_0), sizeof(BlockQ4_0)}) {
    const auto w = test::random_blocks(
        bb == sizeof(BlockQ8_0) ? GgmlType::Q8_0 : GgmlType::Q4_0, k / kQK, 5);
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

}  // namespace
}  // namespace channel
