// The scalar table of quant_kernels.h (the references themselves) and the dispatch to the
// best variant the CPU executes.
#include "backend/cpu/quant_kernels.h"

#include <vector>

#include "backend/cpu/simd_variants.h"
#include "backend/cpu/vec_kernels_isa.h"
#include "ops/quant.h"
#include "ops/quant_k.h"
#include "ops/quant_legacy.h"

namespace channel::cpu {
namespace {

template <float (*kDot)(const void*, const void*, int64_t)>
void dot_multi_ref(const void* w, const void* x, size_t x_stride, int nt, int64_t n_blocks,
                   float* out) {
  for (int t = 0; t < nt; ++t)
    out[t] = kDot(w, static_cast<const uint8_t*>(x) + t * x_stride, n_blocks);
}

}  // namespace

const QuantTypeKernels* quant_type_kernels_ref(GgmlType type) {
  static const QuantTypeKernels q4_1{kQK,
                                     sizeof(BlockQ8_1),
                                     quantize_row_q8_1_ref,
                                     dot_q4_1_ref,
                                     dequantize_row_q4_1_ref,
                                     dot_multi_ref<dot_q4_1_ref>,
                                     4};
  static const QuantTypeKernels q5_0{kQK,
                                     sizeof(BlockQ8_0),
                                     quantize_row_q8_0_ref,
                                     dot_q5_0_ref,
                                     dequantize_row_q5_0_ref,
                                     dot_multi_ref<dot_q5_0_ref>,
                                     4};
  static const QuantTypeKernels q5_1{kQK,
                                     sizeof(BlockQ8_1),
                                     quantize_row_q8_1_ref,
                                     dot_q5_1_ref,
                                     dequantize_row_q5_1_ref,
                                     dot_multi_ref<dot_q5_1_ref>,
                                     4};
  static const QuantTypeKernels q2_k{kQK_K,
                                     sizeof(BlockQ8_K),
                                     quantize_row_q8_K_ref,
                                     dot_q2_K_ref,
                                     dequantize_row_q2_K_ref,
                                     dot_multi_ref<dot_q2_K_ref>,
                                     4};
  static const QuantTypeKernels q3_k{kQK_K,
                                     sizeof(BlockQ8_K),
                                     quantize_row_q8_K_ref,
                                     dot_q3_K_ref,
                                     dequantize_row_q3_K_ref,
                                     dot_multi_ref<dot_q3_K_ref>,
                                     4};
  static const QuantTypeKernels q4_k{kQK_K,
                                     sizeof(BlockQ8_K),
                                     quantize_row_q8_K_ref,
                                     dot_q4_K_ref,
                                     dequantize_row_q4_K_ref,
                                     dot_multi_ref<dot_q4_K_ref>,
                                     4};
  static const QuantTypeKernels q5_k{kQK_K,
                                     sizeof(BlockQ8_K),
                                     quantize_row_q8_K_ref,
                                     dot_q5_K_ref,
                                     dequantize_row_q5_K_ref,
                                     dot_multi_ref<dot_q5_K_ref>,
                                     4};
  static const QuantTypeKernels q6_k{kQK_K,
                                     sizeof(BlockQ8_K),
                                     quantize_row_q8_K_ref,
                                     dot_q6_K_ref,
                                     dequantize_row_q6_K_ref,
                                     dot_multi_ref<dot_q6_K_ref>,
                                     4};
  switch (type) {
    case GgmlType::Q4_1:
      return &q4_1;
    case GgmlType::Q5_0:
      return &q5_0;
    case GgmlType::Q5_1:
      return &q5_1;
    case GgmlType::Q2_K:
      return &q2_k;
    case GgmlType::Q3_K:
      return &q3_k;
    case GgmlType::Q4_K:
      return &q4_k;
    case GgmlType::Q5_K:
      return &q5_k;
    case GgmlType::Q6_K:
      return &q6_k;
    default:
      return nullptr;
  }
}

namespace scalar {
const QuantTypeKernels* quant_type_kernels(GgmlType type) {
  return quant_type_kernels_ref(type);
}
}  // namespace scalar

std::span<const QuantKernels> quant_kernel_variants() {
  static const QuantKernels kScalar{"scalar", quant_type_kernels_ref};
  static const std::vector<QuantKernels> all =
      simd::runnable_best_first(quant_kernels_avx512_variant(), simd::cpu_runs_avx512vnni(),
                                quant_kernels_avx2_variant(), kScalar);
  return all;
}

namespace {

const QuantKernels& best() {
  static const QuantKernels& b = quant_kernel_variants().front();
  return b;
}

}  // namespace

const char* quant_kernels_isa() {
  return best().isa;
}

const QuantTypeKernels* quant_type_kernels(GgmlType type) {
  return best().for_type(type);
}

}  // namespace channel::cpu
