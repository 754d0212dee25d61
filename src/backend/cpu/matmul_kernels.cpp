// matmul_kernels.h: runs the best variant the CPU executes (AVX-512 with VNNI, AVX2 or
// scalar; each in its own file, compiled whenever the compiler can target it).
#include "backend/cpu/matmul_kernels.h"

#include <vector>

#include "backend/cpu/simd_variants.h"

namespace channel::cpu {

std::span<const MatmulKernels> matmul_kernel_variants() {
  static const std::vector<MatmulKernels> all =
      simd::runnable_best_first(matmul_kernels_avx512_variant(), simd::cpu_runs_avx512vnni(),
                                matmul_kernels_avx2_variant(), *matmul_kernels_scalar_variant());
  return all;
}

namespace {

const MatmulKernels& best() {
  static const MatmulKernels& b = matmul_kernel_variants().front();
  return b;
}

}  // namespace

const char* matmul_kernels_isa() {
  return best().isa;
}

bool matmul_reads_groups(GgmlType type) {
  return best().reads_groups && best().reads_groups(type);
}

int64_t matmul_row_granule(GgmlType type, int64_t n) {
  return best().row_granule(type, n);
}

void matmul_rows(const MatmulWeights& w, const MatmulInput& x, int64_t r0, int64_t r1, float* y,
                 int64_t y_stride) {
  best().rows(w, x, r0, r1, y, y_stride);
}

}  // namespace channel::cpu
