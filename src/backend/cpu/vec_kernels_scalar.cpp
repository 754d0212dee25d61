// The scalar variant of the row kernels: the references of ops/quant.h themselves, the
// portable fallback.
#include "backend/cpu/vec_kernels_isa.h"
#include "ops/fp16.h"
#include "ops/quant.h"

namespace channel::cpu {

namespace scalar {

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

constexpr VecKernels kTable = CHANNEL_VEC_KERNEL_TABLE("scalar");

}  // namespace scalar

const VecKernels* vec_kernels_scalar_variant() {
  return &scalar::kTable;
}

}  // namespace channel::cpu
