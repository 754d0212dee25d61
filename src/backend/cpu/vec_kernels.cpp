// vec_kernels.h: runs the best variant the CPU executes (AVX-512 with VNNI, AVX2 or scalar;
// each in its own file, compiled whenever the compiler can target it).
#include "backend/cpu/vec_kernels.h"

#include "backend/cpu/simd_variants.h"
#include "backend/cpu/vec_kernels_isa.h"

namespace channel::cpu {

std::span<const VecKernels> vec_kernel_variants() {
  static const std::vector<VecKernels> all =
      simd::runnable_best_first(vec_kernels_avx512_variant(), simd::cpu_runs_avx512vnni(),
                                vec_kernels_avx2_variant(), *vec_kernels_scalar_variant());
  return all;
}

namespace {

const VecKernels& best() {
  static const VecKernels& b = vec_kernel_variants().front();
  return b;
}

}  // namespace

const char* vec_kernels_isa() {
  return best().isa;
}

void dequantize_row_f16(const uint16_t* x, float* y, int64_t k) {
  best().dequantize_row_f16(x, y, k);
}
void dequantize_row_bf16(const uint16_t* x, float* y, int64_t k) {
  best().dequantize_row_bf16(x, y, k);
}
void dequantize_row_q8_0(const void* x, float* y, int64_t k) {
  best().dequantize_row_q8_0(x, y, k);
}
void dequantize_row_q4_0(const void* x, float* y, int64_t k) {
  best().dequantize_row_q4_0(x, y, k);
}
void quantize_row_q8_0(const float* x, void* y, int64_t k) {
  best().quantize_row_q8_0(x, y, k);
}
void round_row_f16(const float* x, float* y, int64_t k) {
  best().round_row_f16(x, y, k);
}
void round_row_bf16(const float* x, float* y, int64_t k) {
  best().round_row_bf16(x, y, k);
}
float dot_f32(const float* w, const float* x, int64_t n) {
  return best().dot_f32(w, x, n);
}
float dot_f16(const uint16_t* w, const float* x, int64_t n) {
  return best().dot_f16(w, x, n);
}
float dot_bf16(const uint16_t* w, const float* x, int64_t n) {
  return best().dot_bf16(w, x, n);
}
float dot_q8_0(const void* w, const void* x, int64_t nb) {
  return best().dot_q8_0(w, x, nb);
}
float dot_q4_0(const void* w, const void* x, int64_t nb) {
  return best().dot_q4_0(w, x, nb);
}

}  // namespace channel::cpu
