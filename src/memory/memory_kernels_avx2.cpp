// The AVX2 + F16C variants of the centroid scan and f32 -> f16 rows (memory_kernels.h).
#include <cstring>

#include "backend/cpu/simd.h"
#include "memory/memory_kernels.h"

namespace channel {

#if defined(CHANNEL_SIMD_AVX2)

namespace mem_avx2 {
namespace {

void centroid_dots(const uint8_t* base, size_t stride_bytes, size_t n, const float* q, size_t dim,
                   float* dots, float* norms2) {
  for (size_t r = 0; r < n; ++r) {
    const uint16_t* row = reinterpret_cast<const uint16_t*>(base + r * stride_bytes);
    __m256 d = _mm256_setzero_ps(), nn = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 8 <= dim; i += 8) {
      const __m256 c = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + i)));
      d = _mm256_fmadd_ps(c, _mm256_loadu_ps(q + i), d);
      nn = _mm256_fmadd_ps(c, c, nn);
    }
    float dot = simd::hsum(d), norm = simd::hsum(nn);
    if (i < dim) {
      float td = 0.0f, tn = 0.0f;
      centroid_dots_ref(reinterpret_cast<const uint8_t*>(row + i), 0, 1, q + i, dim - i, &td, &tn);
      dot += td;
      norm += tn;
    }
    dots[r] = dot;
    norms2[r] = norm;
  }
}

void f32_to_f16_row(const float* x, uint16_t* y, size_t k) {
  size_t i = 0;
  for (; i + 8 <= k; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  }
  if (i < k) f32_to_f16_row_ref(x + i, y + i, k - i);
}

}  // namespace
}  // namespace mem_avx2

const CentroidKernels* centroid_kernels_avx2() {
  static const CentroidKernels k{"avx2", mem_avx2::centroid_dots, mem_avx2::f32_to_f16_row};
  return &k;
}

#else  // CHANNEL_SIMD_AVX2

const CentroidKernels* centroid_kernels_avx2() {
  return nullptr;  // this compiler cannot target avx2
}

#endif  // CHANNEL_SIMD_AVX2

}  // namespace channel
