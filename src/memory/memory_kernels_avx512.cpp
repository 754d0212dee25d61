// The AVX-512 variants of the centroid scan and f32 -> f16 rows (memory_kernels.h).
#include <cstring>

#include "backend/cpu/simd.h"
#include "memory/memory_kernels.h"

namespace channel {

#if defined(CHANNEL_SIMD_AVX512)

namespace mem_avx512 {
namespace {

void centroid_dots(const uint8_t* base, size_t stride_bytes, size_t n, const float* q, size_t dim,
                   float* dots, float* norms2) {
  const size_t tail = dim % 16;
  const __mmask16 tail_mask = static_cast<__mmask16>((1u << tail) - 1u);
  for (size_t r = 0; r < n; ++r) {
    const uint16_t* row = reinterpret_cast<const uint16_t*>(base + r * stride_bytes);
    __m512 d0 = _mm512_setzero_ps(), d1 = _mm512_setzero_ps();
    __m512 n0 = _mm512_setzero_ps(), n1 = _mm512_setzero_ps();
    size_t i = 0;
    for (; i + 32 <= dim; i += 32) {
      const __m512 c0 =
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + i)));
      const __m512 c1 =
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + i + 16)));
      d0 = _mm512_fmadd_ps(c0, _mm512_loadu_ps(q + i), d0);
      d1 = _mm512_fmadd_ps(c1, _mm512_loadu_ps(q + i + 16), d1);
      n0 = _mm512_fmadd_ps(c0, c0, n0);
      n1 = _mm512_fmadd_ps(c1, c1, n1);
    }
    for (; i + 16 <= dim; i += 16) {
      const __m512 c =
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + i)));
      d0 = _mm512_fmadd_ps(c, _mm512_loadu_ps(q + i), d0);
      n0 = _mm512_fmadd_ps(c, c, n0);
    }
    if (tail) {
      const __m512 c = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(tail_mask, row + i));
      d0 = _mm512_fmadd_ps(c, _mm512_maskz_loadu_ps(tail_mask, q + i), d0);
      n0 = _mm512_fmadd_ps(c, c, n0);
    }
    dots[r] = simd::hsum(_mm512_add_ps(d0, d1));
    norms2[r] = simd::hsum(_mm512_add_ps(n0, n1));
  }
}

void f32_to_f16_row(const float* x, uint16_t* y, size_t k) {
  size_t i = 0;
  for (; i + 16 <= k; i += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  }
  if (i < k) f32_to_f16_row_ref(x + i, y + i, k - i);
}

}  // namespace
}  // namespace mem_avx512

const CentroidKernels* centroid_kernels_avx512() {
  static const CentroidKernels k{"avx512", mem_avx512::centroid_dots,
                                 mem_avx512::f32_to_f16_row};
  return &k;
}

#else  // CHANNEL_SIMD_AVX512

const CentroidKernels* centroid_kernels_avx512() {
  return nullptr;  // this compiler cannot target avx512
}

#endif  // CHANNEL_SIMD_AVX512

}  // namespace channel
