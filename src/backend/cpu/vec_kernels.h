// vec_kernels.h: the CPU's SIMD versions of the row kernels in ops/quant.h (dequantize,
// quantize, dot) plus activation rounding. Same contracts as the *_ref functions; written
// once per ISA (vec_kernels_{avx512,avx2,scalar}.cpp, backend/cpu/simd.h), and the functions
// below run the best variant the CPU executes.
#pragma once

#include <cstdint>
#include <span>

namespace channel::cpu {

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

// One variant of the family, for simd_variants_test. Conversions and quantization are exact
// in every variant (the references' bits); the dots differ only in the order of additions.
struct VecKernels {
  const char* isa;  // "avx512" (with VNNI), "avx2", "scalar"
  void (*dequantize_row_f16)(const uint16_t* x, float* y, int64_t k);
  void (*dequantize_row_bf16)(const uint16_t* x, float* y, int64_t k);
  void (*dequantize_row_q8_0)(const void* x, float* y, int64_t k);
  void (*dequantize_row_q4_0)(const void* x, float* y, int64_t k);
  void (*quantize_row_q8_0)(const float* x, void* y, int64_t k);
  void (*round_row_f16)(const float* x, float* y, int64_t k);
  void (*round_row_bf16)(const float* x, float* y, int64_t k);
  float (*dot_f32)(const float* w, const float* x, int64_t n);
  float (*dot_f16)(const uint16_t* w, const float* x, int64_t n);
  float (*dot_bf16)(const uint16_t* w, const float* x, int64_t n);
  float (*dot_q8_0)(const void* w, const void* x, int64_t n_blocks);
  float (*dot_q4_0)(const void* w, const void* x, int64_t n_blocks);
};

// The variants this build has and this CPU runs, best first (the last is the scalar one).
std::span<const VecKernels> vec_kernel_variants();
// The variant the functions above run.
const char* vec_kernels_isa();

}  // namespace channel::cpu
