// Dispatch of memory_kernels.h: the centroid scan and f16 conversion run the best variant
// the CPU executes (memory_kernels_avx512.cpp, memory_kernels_avx2.cpp, or the scalar
// references), and so does the int8 scan (int8_dots_vnni.cpp, memory_kernels_avx2.cpp, or
// the reference).
#include <cstring>
#include <vector>

#include "backend/cpu/simd_variants.h"
#include "memory/memory_kernels.h"

namespace channel {

const CentroidKernels* centroid_kernels_avx512();
const CentroidKernels* centroid_kernels_avx2();

std::span<const CentroidKernels> centroid_kernel_variants() {
  static const CentroidKernels kScalar{"scalar", centroid_dots_ref, f32_to_f16_row_ref};
  static const std::vector<CentroidKernels> all = simd::runnable_best_first(
      centroid_kernels_avx512(), simd::cpu_runs_avx512(), centroid_kernels_avx2(), kScalar);
  return all;
}

namespace {

const CentroidKernels& best_centroid_kernels() {
  static const CentroidKernels& b = centroid_kernel_variants().front();
  return b;
}

}  // namespace

const char* memory_kernels_isa() {
  return best_centroid_kernels().isa;
}

void centroid_dots(const uint8_t* base, size_t stride_bytes, size_t n, const float* q, size_t dim,
                   float* dots, float* norms2) {
  best_centroid_kernels().centroid_dots(base, stride_bytes, n, q, dim, dots, norms2);
}

void f32_to_f16_row(const float* x, uint16_t* y, size_t k) {
  best_centroid_kernels().f32_to_f16_row(x, y, k);
}

// --- int8 rows . int8 query ------------------------------------------------------------------

const Int8DotsVariant* int8_dots_vnni_variant();
const Int8DotsVariant* int8_dots_avx2_variant();

size_t int8_dots_variants(const Int8DotsVariant** out) {
  static const Int8DotsVariant kScalar{"scalar", int8_dots_ref};
  static const std::vector<Int8DotsVariant> all = simd::runnable_best_first(
      int8_dots_vnni_variant(), simd::cpu_runs_avx512vnni(), int8_dots_avx2_variant(), kScalar);
  *out = all.data();
  return all.size();
}

void int8_dots(const int8_t* rows, size_t stride, size_t n, const int8_t* q, size_t dim,
               int32_t* dots) {
  static const Int8DotsFn best = [] {
    const Int8DotsVariant* v = nullptr;
    int8_dots_variants(&v);
    return v[0].fn;  // the best this CPU runs
  }();
  best(rows, stride, n, q, dim, dots);
}

}  // namespace channel
