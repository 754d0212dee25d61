// quant_legacy.h: llama.cpp's other 32-element block types, the ones K-quant files fall back
// to where a row is not a multiple of 256: Q4_1, Q5_0, Q5_1, and Q8_1 (the activations of
// the Q4_1/Q5_1 dots). Scalar references only; SIMD versions live in backend/cpu.
#pragma once

#include <cstdint>

#include "ops/quant.h"

namespace channel {

// Q4_1: value j = d * nibble + m (nibbles as in Q4_0: byte j holds elements j and j + 16).
struct BlockQ4_1 {
  uint16_t d, m;        // f16 scale and minimum
  uint8_t qs[kQK / 2];  // [16]
};
static_assert(sizeof(BlockQ4_1) == 20);

// Q5_0: value = d * (q - 16) with q = nibble | (bit j of qh) << 4 (elements j and j + 16 as
// in Q4_0, their fifth bits at bit j and bit j + 16 of the little-endian qh).
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ5_0) == 22);

// Q5_1: value = d * q + m, q as in Q5_0 (unsigned, 0..31).
struct BlockQ5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ5_1) == 24);

// Q8_1: Q8_0 plus s = d * sum(qs) (f16), which carries a Q4_1/Q5_1 minimum through the dot.
struct BlockQ8_1 {
  uint16_t d, s;
  int8_t qs[kQK];
};
static_assert(sizeof(BlockQ8_1) == 36);

// The 32 quants of block i as integers: Q4_1/Q5_1 unsigned (0..15 / 0..31), Q5_0 signed
// (-16..15). Scales through the out-parameters (Q5_0 has no minimum).
void unpack_q4_1(const void* row, int64_t i, int8_t q[kQK], float* d, float* m);
void unpack_q5_0(const void* row, int64_t i, int8_t q[kQK], float* d);
void unpack_q5_1(const void* row, int64_t i, int8_t q[kQK], float* d, float* m);

void dequantize_row_q4_1_ref(const void* x, float* y, int64_t k);
void dequantize_row_q5_0_ref(const void* x, float* y, int64_t k);
void dequantize_row_q5_1_ref(const void* x, float* y, int64_t k);

// Activations for Q4_1/Q5_1 weights: Q8_0's arithmetic (d = amax / 127, q rounded ties to
// even), plus s = f16(d * sum(q)) with d in f32, as llama.cpp's x86 quantizer.
void quantize_row_q8_1_ref(const float* x, void* y, int64_t k);

// Weights (model writers): llama.cpp's reference roundings. Q4_1/Q5_1: d = (max - min) /
// (15 or 31), m = min, q = min(top, trunc((x - min) / d + 0.5)). Q5_0: d = max / -16 (max the
// signed value of largest magnitude), q = min(31, trunc(x / d + 16.5)).
void quantize_row_q4_1_ref(const float* x, void* y, int64_t k);
void quantize_row_q5_0_ref(const float* x, void* y, int64_t k);
void quantize_row_q5_1_ref(const float* x, void* y, int64_t k);

// Dots: the exact integer dot per block, then sum += (d_w * d_x) * isum (+ m_w * s_x).
float dot_q5_0_ref(const void* w, const void* x, int64_t n_blocks);  // x: Q8_0
float dot_q4_1_ref(const void* w, const void* x, int64_t n_blocks);  // x: Q8_1
float dot_q5_1_ref(const void* w, const void* x, int64_t n_blocks);  // x: Q8_1

}  // namespace channel
