// vec_kernels.h: the CPU's SIMD versions of the row kernels in ops/quant.h (dequantize,
// quantize, dot) plus activation rounding. Same contracts as the *_ref functions; each is
// compiled for AVX-512, AVX2 or plain C++ depending on the build's target flags.
#pragma once

#include <cstdint>

namespace channel::cpu {

// Which instruction set these kernels were compiled for ("avx512-vnni", "avx2", "scalar").
const char* vec_kernels_isa();

void dequantize_row_f16(const uint16_t* x, float* y, int64_t k);
void dequantize_row_bf16(const uint16_t* x, float* y, int64_t k);
void dequantize_row_q8_0(const void* x, float* y, int64_t k);  // k % 32 == 0
void dequantize_row_q4_0(const void* x, float* y, int64_t k);  // k % 32 == 0

void quantize_row_q8_0(const float* x, void* y, int64_t k);  // k % 32 == 0

// y[i] = x[i] rounded to f16 / bf16 (nearest even) and back: activations for f16/bf16 dots.
void round_row_f16(const float* x, float* y, int64_t k);
void round_row_bf16(const float* x, float* y, int64_t k);

float dot_f32(const float* w, const float* x, int64_t n);
float dot_f16(const uint16_t* w, const float* x, int64_t n);
float dot_bf16(const uint16_t* w, const float* x, int64_t n);
float dot_q8_0(const void* w, const void* x, int64_t n_blocks);
float dot_q4_0(const void* w, const void* x, int64_t n_blocks);

}  // namespace channel::cpu
