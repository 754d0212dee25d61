#include "support/quant_fixtures.h"

#include <cstring>
#include <random>

#include "backend/cpu/quant_kernels.h"
#include "ops/fp16.h"
#include "ops/quant.h"
#include "ops/quant_k.h"
#include "ops/quant_legacy.h"
#include "ops/quantize.h"

namespace channel::test {

std::vector<float> random_normal_floats(int64_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

std::vector<int> factor_offsets(GgmlType type) {
  switch (type) {
    case GgmlType::Q8_0:
    case GgmlType::Q4_0:
    case GgmlType::Q5_0:
      return {0};
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
      return {0, 2};
    case GgmlType::Q2_K:
      return {80, 82};
    case GgmlType::Q3_K:
      return {108};
    case GgmlType::Q6_K:
      return {208};
    default:
      return {};
  }
}

std::vector<uint8_t> random_blocks(GgmlType type, int64_t n_blocks, uint32_t seed, int pad,
                                   bool fuzz) {
  const int64_t block_bytes = ggml_type_traits(static_cast<uint32_t>(type))->block_bytes;
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(static_cast<size_t>(n_blocks * block_bytes + pad));
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  if (fuzz) return v;
  std::uniform_real_distribution<float> f(-0.05f, 0.05f);
  for (int64_t i = 0; i < n_blocks; ++i) {
    for (int off : factor_offsets(type)) {
      const uint16_t h = fp32_to_fp16(f(rng));
      std::memcpy(v.data() + pad + i * block_bytes + off, &h, 2);
    }
  }
  return v;
}

std::vector<float> dequantize_activations(GgmlType type, const uint8_t* xq, int64_t k) {
  std::vector<float> out(static_cast<size_t>(k));
  const cpu::QuantTypeKernels* ref = cpu::quant_type_kernels_ref(type);
  const int64_t elems = ref ? ref->block_elems : kQK;
  for (int64_t b = 0; b < k / elems; ++b) {
    if (elems == kQK_K) {
      BlockQ8_K blk;
      std::memcpy(&blk, xq + b * sizeof(BlockQ8_K), sizeof(blk));
      for (int j = 0; j < kQK_K; ++j) out[b * kQK_K + j] = blk.d * blk.qs[j];
    } else if (!ref || ref->act_block_bytes == static_cast<int64_t>(sizeof(BlockQ8_0))) {
      dequantize_row_q8_0_ref(xq + b * sizeof(BlockQ8_0), out.data() + b * kQK, kQK);
    } else {
      BlockQ8_1 blk;
      std::memcpy(&blk, xq + b * sizeof(BlockQ8_1), sizeof(blk));
      for (int j = 0; j < kQK; ++j) out[b * kQK + j] = fp16_to_fp32(blk.d) * blk.qs[j];
    }
  }
  return out;
}

namespace {

// o.info and o.w describe o.bytes as a [rows][cols] tensor of `type`.
void describe(OwnedWeight& o, GgmlType type, int64_t rows, int64_t cols) {
  o.info.name = "blk.0.test.weight";
  o.info.type_id = static_cast<uint32_t>(type);
  o.info.n_dims = 2;
  o.info.ne[0] = cols;
  o.info.ne[1] = rows;
  o.info.n_bytes = o.bytes.size();
  o.info.data = o.bytes.data();
  o.w = make_weight_matrix(o.info);
}

}  // namespace

OwnedWeight make_random_weight(GgmlType type, int64_t rows, int64_t cols, uint32_t seed) {
  OwnedWeight o;
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.5f);
  o.values.resize(static_cast<size_t>(rows * cols));
  for (auto& v : o.values) v = dist(rng);
  const auto traits = *ggml_type_traits(static_cast<uint32_t>(type));
  const size_t row_bytes = ggml_row_bytes(traits, cols);
  o.bytes.resize(row_bytes * rows);
  for (int64_t r = 0; r < rows; ++r) {
    const float* src = o.values.data() + r * cols;
    uint8_t* dst = o.bytes.data() + r * row_bytes;
    switch (type) {
      case GgmlType::F32:
        std::memcpy(dst, src, static_cast<size_t>(cols) * 4);
        break;
      case GgmlType::F16:
      case GgmlType::BF16:
        for (int64_t c = 0; c < cols; ++c) {
          const uint16_t h = type == GgmlType::F16 ? fp32_to_fp16(src[c]) : fp32_to_bf16(src[c]);
          std::memcpy(dst + 2 * c, &h, 2);
        }
        break;
      case GgmlType::Q8_0:
        quantize_row_q8_0_ref(src, dst, cols);
        break;
      case GgmlType::Q4_0:
        quantize_row_q4_0_ref(src, dst, cols);
        break;
      case GgmlType::Q5_0:
        quantize_row_q5_0_ref(src, dst, cols);
        break;
      default:
        quantize_row(type, src, dst, cols);
        break;
    }
  }
  describe(o, type, rows, cols);
  return o;
}

OwnedWeight random_block_weight(GgmlType type, int64_t rows, int64_t cols, uint32_t seed) {
  const int64_t per_row = cols / ggml_type_traits(static_cast<uint32_t>(type))->block_elems;
  OwnedWeight o;
  o.bytes = random_blocks(type, rows * per_row, seed);
  describe(o, type, rows, cols);
  return o;
}

}  // namespace channel::test
