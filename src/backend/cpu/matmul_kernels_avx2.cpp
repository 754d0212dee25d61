// The AVX2 (+ FMA, F16C) variant of the matmul loops: the loop over row dots
// (matmul_dot_rows.h) with the AVX2 row kernels of vec_kernels and quant_kernels.
#include "backend/cpu/matmul_kernels.h"

#if defined(CHANNEL_SIMD_AVX2)

#include <algorithm>
#include <cstddef>

#include "backend/cpu/quant_kernels.h"
#include "backend/cpu/vec_kernels_isa.h"
#include "ops/quant.h"

namespace channel::cpu {

namespace avx2 {
namespace {
#include "backend/cpu/matmul_dot_rows.h"
}  // namespace

constexpr MatmulKernels kTable{"avx2", dot_row_granule, dot_rows};

}  // namespace avx2

const MatmulKernels* matmul_kernels_avx2_variant() {
  return &avx2::kTable;
}

}  // namespace channel::cpu

#else  // CHANNEL_SIMD_AVX2

namespace channel::cpu {
const MatmulKernels* matmul_kernels_avx2_variant() {
  return nullptr;
}
}  // namespace channel::cpu

#endif  // CHANNEL_SIMD_AVX2
