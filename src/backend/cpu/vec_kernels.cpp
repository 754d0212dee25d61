// Dispatch of the row kernels to the best variant this build targets; the scalar fallback
// is the reference itself.
#include "backend/cpu/vec_kernels.h"

#include <cmath>

#include "backend/cpu/vec_kernels_isa.h"
#include "ops/fp16.h"
#include "ops/quant.h"

namespace channel::cpu {

#if defined(CHANNEL_SIMD_VNNI)
namespace best = avx512;
#elif defined(CHANNEL_SIMD_AVX2)
namespace best = avx2;
#endif

const char* vec_kernels_isa() {
#if defined(CHANNEL_SIMD_VNNI)
  return "avx512-vnni";
#elif defined(CHANNEL_SIMD_AVX2)
  return "avx2";
#else
  return "scalar";
#endif
}

#if defined(CHANNEL_SIMD_AVX2)
void dequantize_row_f16(const uint16_t* x, float* y, int64_t k) {
  best::dequantize_row_f16(x, y, k);
}
void dequantize_row_bf16(const uint16_t* x, float* y, int64_t k) {
  best::dequantize_row_bf16(x, y, k);
}
void dequantize_row_q8_0(const void* x, float* y, int64_t k) {
  best::dequantize_row_q8_0(x, y, k);
}
void dequantize_row_q4_0(const void* x, float* y, int64_t k) {
  best::dequantize_row_q4_0(x, y, k);
}
void quantize_row_q8_0(const float* x, void* y, int64_t k) {
  best::quantize_row_q8_0(x, y, k);
}
void round_row_f16(const float* x, float* y, int64_t k) {
  best::round_row_f16(x, y, k);
}
void round_row_bf16(const float* x, float* y, int64_t k) {
  best::round_row_bf16(x, y, k);
}
float dot_f32(const float* w, const float* x, int64_t n) {
  return best::dot_f32(w, x, n);
}
float dot_f16(const uint16_t* w, const float* x, int64_t n) {
  return best::dot_f16(w, x, n);
}
float dot_bf16(const uint16_t* w, const float* x, int64_t n) {
  return best::dot_bf16(w, x, n);
}
float dot_q8_0(const void* w, const void* x, int64_t nb) {
  return best::dot_q8_0(w, x, nb);
}
float dot_q4_0(const void* w, const void* x, int64_t nb) {
  return best::dot_q4_0(w, x, nb);
}
#else
void dequantize_row_f16(const uint16_t* x, float* y, int64_t k) {
  dequantize_row_f16_ref(x, y, k);
}
void dequantize_row_bf16(const uint16_t* x, float* y, int64_t k) {
  dequantize_row_bf16_ref(x, y, k);
}
void dequantize_row_q8_0(const void* x, float* y, int64_t k) {
  dequantize_row_q8_0_ref(x, y, k);
}
void dequantize_row_q4_0(const void* x, float* y, int64_t k) {
  dequantize_row_q4_0_ref(x, y, k);
}
void quantize_row_q8_0(const float* x, void* y, int64_t k) {
  quantize_row_q8_0_ref(x, y, k);
}
void round_row_f16(const float* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k; ++i) y[i] = fp16_to_fp32(fp32_to_fp16(x[i]));
}
void round_row_bf16(const float* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k; ++i) y[i] = bf16_to_fp32(fp32_to_bf16(x[i]));
}
float dot_f32(const float* w, const float* x, int64_t n) {
  return dot_f32_ref(w, x, n);
}
float dot_f16(const uint16_t* w, const float* x, int64_t n) {
  return dot_f16_ref(w, x, n);
}
float dot_bf16(const uint16_t* w, const float* x, int64_t n) {
  return dot_bf16_ref(w, x, n);
}
float dot_q8_0(const void* w, const void* x, int64_t nb) {
  return dot_q8_0_ref(w, x, nb);
}
float dot_q4_0(const void* w, const void* x, int64_t nb) {
  return dot_q4_0_ref(w, x, nb);
}
#endif

}  // namespace channel::cpu
