// vec_kernels_isa.h: the per-instruction-set variants behind vec_kernels.h, each in a
// namespace of its own (avx512, avx2, scalar) so that the other families' variants of the
// same ISA (quant_kernels, matmul_kernels) call them directly. A variant's namespace is
// declared only where the translation unit is compiled for its ISA (backend/cpu/simd.h);
// vec_kernels_<isa>_variant() is declared everywhere and is nullptr where the build lacks it.
#pragma once

#include <cstdint>

#include "backend/cpu/simd.h"  // CHANNEL_SIMD_AVX2; the AVX-512 variant needs CHANNEL_SIMD_VNNI
#include "backend/cpu/vec_kernels.h"

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

// The VecKernels table of the namespace it is expanded in.
#define CHANNEL_VEC_KERNEL_TABLE(isa)                                                          \
  VecKernels {                                                                                 \
    isa, dequantize_row_f16, dequantize_row_bf16, dequantize_row_q8_0, dequantize_row_q4_0,    \
        quantize_row_q8_0, round_row_f16, round_row_bf16, dot_f32, dot_f16, dot_bf16, dot_q8_0, \
        dot_q4_0                                                                               \
  }

namespace channel::cpu {

const VecKernels* vec_kernels_avx512_variant();
const VecKernels* vec_kernels_avx2_variant();
const VecKernels* vec_kernels_scalar_variant();

namespace scalar {
CHANNEL_VEC_KERNEL_DECLS
}  // namespace scalar
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
