// vec_kernels_isa.h: the per-instruction-set variants behind vec_kernels.h. Every variant the
// compiler can target is built (an AVX-512 build also contains the AVX2 one), so tests can
// check each against the scalar reference; vec_kernels.cpp dispatches to the best one.
#pragma once

#include <cstdint>

#include "backend/cpu/simd.h"  // CHANNEL_SIMD_AVX2; the AVX-512 variant needs CHANNEL_SIMD_VNNI

#define CHANNEL_VEC_KERNEL_DECLS                                    \
  void dequantize_row_f16(const uint16_t* x, float* y, int64_t k);  \
  void dequantize_row_bf16(const uint16_t* x, float* y, int64_t k); \
  void dequantize_row_q8_0(const void* x, float* y, int64_t k);     \
  void dequantize_row_q4_0(const void* x, float* y, int64_t k);     \
  void quantize_row_q8_0(const float* x, void* y, int64_t k);       \
  void round_row_f16(const float* x, float* y, int64_t k);          \
  void round_row_bf16(const float* x, float* y, int64_t k);         \
  float dot_f32(const float* w, const float* x, int64_t n);         \
  float dot_f16(const uint16_t* w, const float* x, int64_t n);      \
  float dot_bf16(const uint16_t* w, const float* x, int64_t n);     \
  float dot_q8_0(const void* w, const void* x, int64_t n_blocks);   \
  float dot_q4_0(const void* w, const void* x, int64_t n_blocks);

namespace channel::cpu {
#if defined(CHANNEL_SIMD_AVX2)
namespace avx2 {
CHANNEL_VEC_KERNEL_DECLS
}  // namespace avx2
#endif
#if defined(CHANNEL_SIMD_VNNI)
namespace avx512 {
CHANNEL_VEC_KERNEL_DECLS
}  // namespace avx512
#endif
}  // namespace channel::cpu
