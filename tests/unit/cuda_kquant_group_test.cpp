// The K-quant group dequantizer the CUDA kernels use (backend/cuda/kquant_group.h), run on the
// host against ops/quant_k.h's reference: bit-identical for every group of every K type, on
// quantized data and on arbitrary block bytes. Needs no GPU, so it runs in every build.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cuda/kquant_group.h"
#include "ops/fp16.h"
#include "ops/quant_k.h"
#include "ops/quantize.h"

namespace channel {
namespace {

const GgmlType kTypes[] = {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K,
                           GgmlType::Q6_K};

void dequantize_ref(GgmlType t, const void* x, float* y, int64_t k) {
  switch (t) {
    case GgmlType::Q2_K: return dequantize_row_q2_K_ref(x, y, k);
    case GgmlType::Q3_K: return dequantize_row_q3_K_ref(x, y, k);
    case GgmlType::Q4_K: return dequantize_row_q4_K_ref(x, y, k);
    case GgmlType::Q5_K: return dequantize_row_q5_K_ref(x, y, k);
    default: return dequantize_row_q6_K_ref(x, y, k);
  }
}

// Every group of every super-block of `bytes` against the reference, bit for bit.
void expect_groups_match(GgmlType t, const std::vector<uint8_t>& bytes, int64_t blocks) {
  std::vector<float> want(static_cast<size_t>(blocks * 256));
  dequantize_ref(t, bytes.data(), want.data(), blocks * 256);
  const int bb = cuda::kq_block_bytes(t);
  for (int64_t b = 0; b < blocks; ++b)
    for (int g = 0; g < 16; ++g) {
      float got[16];
      cuda::kq_group16(t, bytes.data() + b * bb, g, got);
      ASSERT_EQ(std::memcmp(got, want.data() + b * 256 + 16 * g, sizeof(got)), 0)
          << ggml_type_name(static_cast<uint32_t>(t)) << " block " << b << " group " << g;
    }
}

TEST(CudaKquantGroup, BlockSizesMatchTheFormats) {
  EXPECT_EQ(cuda::kq_block_bytes(GgmlType::Q2_K), static_cast<int>(sizeof(BlockQ2_K)));
  EXPECT_EQ(cuda::kq_block_bytes(GgmlType::Q3_K), static_cast<int>(sizeof(BlockQ3_K)));
  EXPECT_EQ(cuda::kq_block_bytes(GgmlType::Q4_K), static_cast<int>(sizeof(BlockQ4_K)));
  EXPECT_EQ(cuda::kq_block_bytes(GgmlType::Q5_K), static_cast<int>(sizeof(BlockQ5_K)));
  EXPECT_EQ(cuda::kq_block_bytes(GgmlType::Q6_K), static_cast<int>(sizeof(BlockQ6_K)));
  EXPECT_FALSE(cuda::is_kquant(GgmlType::Q8_0));
  EXPECT_EQ(cuda::kq_block_bytes(GgmlType::Q4_0), 0);
}

TEST(CudaKquantGroup, QuantizedRowsMatchTheReference) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t blocks = 6;
  std::vector<float> x(static_cast<size_t>(blocks * 256));
  for (float& v : x) v = nd(rng);
  x[3] = 40.0f;  // an outlier, so some scales saturate
  for (GgmlType t : kTypes) {
    std::vector<uint8_t> bytes(static_cast<size_t>(blocks * cuda::kq_block_bytes(t)));
    quantize_row(t, x.data(), bytes.data(), blocks * 256);
    expect_groups_match(t, bytes, blocks);
  }
}

TEST(CudaKquantGroup, ArbitraryBlockBytesMatchTheReference) {
  // Every bit pattern of quants and packed scales, with finite (some subnormal) f16 factors.
  std::mt19937 rng(9);
  const int64_t blocks = 64;
  for (GgmlType t : kTypes) {
    const int bb = cuda::kq_block_bytes(t);
    std::vector<uint8_t> bytes(static_cast<size_t>(blocks * bb));
    for (uint8_t& v : bytes) v = static_cast<uint8_t>(rng());
    // The f16 fields: d and dmin where each type keeps them.
    int fields[2] = {-1, -1};
    switch (t) {
      case GgmlType::Q2_K: fields[0] = 80; fields[1] = 82; break;
      case GgmlType::Q3_K: fields[0] = 108; break;
      case GgmlType::Q6_K: fields[0] = 208; break;
      default: fields[0] = 0; fields[1] = 2; break;
    }
    for (int64_t b = 0; b < blocks; ++b)
      for (int f : fields) {
        if (f < 0) continue;
        const float v = b % 8 == 0 ? 3e-6f * static_cast<float>(b % 3 + 1)   // subnormal f16
                                   : std::ldexp(static_cast<float>(rng() % 2000) - 1000.0f, -12);
        const uint16_t h = fp32_to_fp16(v);
        std::memcpy(bytes.data() + b * bb + f, &h, 2);
      }
    expect_groups_match(t, bytes, blocks);
  }
}

}  // namespace
}  // namespace channel
