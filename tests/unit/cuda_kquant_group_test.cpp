// The group dequantizer the CUDA kernels use for blocks kept as the file stores them
// (backend/cuda/kquant_group.h), run on the host against ops/quant_k.h's and
// ops/quant_legacy.h's references: bit-identical for every group of every K type and of
// Q4_1/Q5_0/Q5_1, on quantized data and on arbitrary block bytes. Needs no GPU, so it runs in
// every build.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cuda/kquant_group.h"
#include "ops/fp16.h"
#include "ops/quant_k.h"
#include "ops/quant_legacy.h"
#include "ops/quantize.h"

namespace channel {
namespace {

const GgmlType kTypes[] = {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K,
                           GgmlType::Q6_K, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1};

void dequantize_ref(GgmlType t, const void* x, float* y, int64_t k) {
  switch (t) {
    case GgmlType::Q2_K: return dequantize_row_q2_K_ref(x, y, k);
    case GgmlType::Q3_K: return dequantize_row_q3_K_ref(x, y, k);
    case GgmlType::Q4_K: return dequantize_row_q4_K_ref(x, y, k);
    case GgmlType::Q5_K: return dequantize_row_q5_K_ref(x, y, k);
    case GgmlType::Q4_1:
      return dequantize_row_q4_1_ref(x, y, k);
    case GgmlType::Q5_0:
      return dequantize_row_q5_0_ref(x, y, k);
    case GgmlType::Q5_1:
      return dequantize_row_q5_1_ref(x, y, k);
    default: return dequantize_row_q6_K_ref(x, y, k);
  }
}

// Every group of every block of `bytes` against the reference, bit for bit, through both the
// block's and the row's group index.
void expect_groups_match(GgmlType t, const std::vector<uint8_t>& bytes, int64_t blocks) {
  const int per = cuda::kq_block_elements(t);
  std::vector<float> want(static_cast<size_t>(blocks * per));
  dequantize_ref(t, bytes.data(), want.data(), blocks * per);
  const int bb = cuda::kq_block_bytes(t);
  ASSERT_EQ(cuda::kq_row_bytes(t, blocks * per), blocks * bb);
  for (int64_t b = 0; b < blocks; ++b)
    for (int g = 0; g < per / 16; ++g) {
      float got[16], in_row[16];
      cuda::kq_group16(t, bytes.data() + b * bb, g, got);
      cuda::kq_row_group16(t, bytes.data(), b * (per / 16) + g, in_row);
      ASSERT_EQ(std::memcmp(got, want.data() + b * per + 16 * g, sizeof(got)), 0)
          << ggml_type_name(static_cast<uint32_t>(t)) << " block " << b << " group " << g;
      ASSERT_EQ(std::memcmp(in_row, got, sizeof(got)), 0);
    }
}

TEST(CudaKquantGroup, BlockSizesMatchTheFormats) {
  EXPECT_EQ(cuda::kq_block_bytes(GgmlType::Q2_K), static_cast<int>(sizeof(BlockQ2_K)));
  EXPECT_EQ(cuda::kq_block_bytes(GgmlType::Q3_K), static_cast<int>(sizeof(BlockQ3_K)));
  EXPECT_EQ(cuda::kq_block_bytes(GgmlType::Q4_K), static_cast<int>(sizeof(BlockQ4_K)));
  EXPECT_EQ(cuda::kq_block_bytes(GgmlType::Q5_K), static_cast<int>(sizeof(BlockQ5_K)));
  EXPECT_EQ(cuda::kq_block_bytes(GgmlType::Q6_K), static_cast<int>(sizeof(BlockQ6_K)));
  EXPECT_EQ(cuda::kq_block_bytes(GgmlType::Q4_1), static_cast<int>(sizeof(BlockQ4_1)));
  EXPECT_EQ(cuda::kq_block_bytes(GgmlType::Q5_0), static_cast<int>(sizeof(BlockQ5_0)));
  EXPECT_EQ(cuda::kq_block_bytes(GgmlType::Q5_1), static_cast<int>(sizeof(BlockQ5_1)));
  EXPECT_EQ(cuda::kq_block_elements(GgmlType::Q6_K), 256);
  EXPECT_EQ(cuda::kq_block_elements(GgmlType::Q5_0), 32);
  EXPECT_FALSE(cuda::is_kquant(GgmlType::Q8_0));
  EXPECT_FALSE(cuda::is_file_block(GgmlType::Q4_0));
  EXPECT_TRUE(cuda::is_file_block(GgmlType::Q5_1));
  EXPECT_EQ(cuda::kq_block_bytes(GgmlType::Q4_0), 0);
}

TEST(CudaKquantGroup, QuantizedRowsMatchTheReference) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(6 * 256);
  for (float& v : x) v = nd(rng);
  x[3] = 40.0f;  // an outlier, so some scales saturate
  for (GgmlType t : kTypes) {
    const int64_t blocks = static_cast<int64_t>(x.size()) / cuda::kq_block_elements(t);
    std::vector<uint8_t> bytes(static_cast<size_t>(blocks * cuda::kq_block_bytes(t)));
    quantize_row(t, x.data(), bytes.data(), static_cast<int64_t>(x.size()));
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
      case GgmlType::Q5_0:
        fields[0] = 0;
        break;
      default:
        fields[0] = 0;
        fields[1] = 2;
        break;  // Q4_K, Q5_K; d and m of Q4_1, Q5_1
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
