// quant.h: llama.cpp's Q8_0 / Q4_0 block layouts and the scalar reference kernels for every
// weight type (dequantize, quantize, dot). These are the short, obvious definitions that the
// SIMD kernels in backend/cpu/vec_kernels.h are tested against; they are never optimised.
#pragma once

#include <cstdint>

namespace channel {

inline constexpr int64_t kQK = 32;  // elements per Q8_0 / Q4_0 block

// Q8_0: value j = d * qs[j].
struct BlockQ8_0 {
  uint16_t d;      // f16 scale
  int8_t qs[kQK];  // [32]
};
static_assert(sizeof(BlockQ8_0) == 34);

// Q4_0: byte j holds element j (low nibble) and element j + 16 (high nibble);
// value = d * (nibble - 8).
struct BlockQ4_0 {
  uint16_t d;           // f16 scale
  uint8_t qs[kQK / 2];  // [16]
};
static_assert(sizeof(BlockQ4_0) == 18);

// Block i of an untyped row, copied out (alignment-safe).
BlockQ8_0 load_q8_0(const void* row, int64_t i);
BlockQ4_0 load_q4_0(const void* row, int64_t i);

// Block data is passed as untyped bytes: a GGUF row of blocks need not be 2-byte aligned
// (34- and 18-byte blocks), so kernels read scales with memcpy, never through BlockQ8_0*.

// --- dequantize: k elements (a multiple of 32 for the block types) to f32 ------------------
void dequantize_row_f16_ref(const uint16_t* x, float* y, int64_t k);
void dequantize_row_bf16_ref(const uint16_t* x, float* y, int64_t k);
void dequantize_row_q8_0_ref(const void* x, float* y, int64_t k);
void dequantize_row_q4_0_ref(const void* x, float* y, int64_t k);

// --- quantize: k floats (a multiple of 32) to blocks ----------------------------------------
// Activations for Q8_0/Q4_0 matmuls. Per block: amax = max|x|, d = amax / 127 stored as f16,
// q = round_half_even(x * (127 / amax)) — the arithmetic of llama.cpp's x86 build (which made
// our goldens), whose SIMD quantizer multiplies by 127/amax and rounds ties to even.
void quantize_row_q8_0_ref(const float* x, void* y, int64_t k);
// Weights (model writers, ops/quantize.h): llama.cpp's reference Q8_0 rounding, which
// llama-quantize uses: d = amax / 127, q = roundf(x * (1 / d)) (ties away from zero).
void quantize_row_q8_0_weights_ref(const float* x, void* y, int64_t k);
// Weights (model writers): llama.cpp's reference Q4_0 rounding, d = max / -8 where max is the
// signed value of largest magnitude, q = min(15, trunc(x / d + 8.5)).
void quantize_row_q4_0_ref(const float* x, void* y, int64_t k);

// --- dot products: weights · activations ------------------------------------------------------
// Float types take f32 activations that the caller has already rounded to the weight's
// format (so w[i] * x[i] is what llama.cpp computes with f16/bf16 activations).
float dot_f32_ref(const float* w, const float* x, int64_t n);
float dot_f16_ref(const uint16_t* w, const float* x, int64_t n);
float dot_bf16_ref(const uint16_t* w, const float* x, int64_t n);
// Quantized types: integer dot per block, times d_w * d_x, summed over n_blocks blocks.
float dot_q8_0_ref(const void* w, const void* x, int64_t n_blocks);
float dot_q4_0_ref(const void* w, const void* x, int64_t n_blocks);

}  // namespace channel
