// Random weights, blocks and activations that the kernel tests share (quant_test,
// quant_types_test, matmul_test and the matmul family of simd_variants_test).
#pragma once

#include <cstdint>
#include <vector>

#include "gguf/ggml_type.h"
#include "gguf/gguf_reader.h"
#include "ops/weight.h"

namespace channel::test {

// n values drawn from N(0, scale^2).
std::vector<float> random_normal_floats(int64_t n, uint32_t seed, float scale = 1.0f);

// Byte offsets of a block's f16 factors (scale, then minimum where the type has one).
std::vector<int> factor_offsets(GgmlType type);

// n_blocks random blocks of `type` after `pad` bytes: every quant and scale bit random, the f16
// factors sane (finite, |x| <= 0.05) unless `fuzz`, when they are random bits too (NaN, inf).
std::vector<uint8_t> random_blocks(GgmlType type, int64_t n_blocks, uint32_t seed, int pad = 0,
                                   bool fuzz = false);

// The activation blocks of a block type's dot (Q8_0, Q8_1 or Q8_K: quant_kernels.h),
// dequantized.
std::vector<float> dequantize_activations(GgmlType type, const uint8_t* xq, int64_t k);

// A random weight matrix of `type`, named blk.0.test.weight, that owns its bytes: N(0, 0.25) values
// converted by the references (F32, F16, BF16, Q8_0, Q4_0, Q5_0) or by quantize_row (the other
// types).
struct OwnedWeight {
  std::vector<float> values;  // [rows][cols] the f32 values before conversion
  std::vector<uint8_t> bytes;
  TensorInfo info;
  WeightMatrix w;
};
OwnedWeight make_random_weight(GgmlType type, int64_t rows, int64_t cols, uint32_t seed);
// The same from random_blocks (every quant bit random, sane factors); `values` is empty.
OwnedWeight random_block_weight(GgmlType type, int64_t rows, int64_t cols, uint32_t seed);

}  // namespace channel::test
