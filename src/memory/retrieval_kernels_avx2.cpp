// The AVX2 + FMA + F16C variants of the retrieval scans (retrieval_kernels.h): each f16 row
// widened once and dotted with every query head that reads it.
#include <algorithm>
#include <limits>

#include "backend/cpu/simd.h"
#include "memory/retrieval_kernels.h"

namespace channel {

#if defined(CHANNEL_SIMD_AVX2)

namespace rk_avx2 {
namespace {

// f16 row -> f32, dim values.
void widen(const uint16_t* row, size_t dim, float* out) {
  size_t i = 0;
  for (; i + 8 <= dim; i += 8)
    _mm256_storeu_ps(out + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + i))));
  for (; i < dim; ++i) out[i] = _cvtsh_ss(row[i]);
}

float dot(const float* a, const float* b, size_t dim) {
  __m256 d0 = _mm256_setzero_ps(), d1 = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 16 <= dim; i += 16) {
    d0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), d0);
    d1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), d1);
  }
  for (; i + 8 <= dim; i += 8)
    d0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), d0);
  float s = simd::hsum(_mm256_add_ps(d0, d1));
  for (; i < dim; ++i) s += a[i] * b[i];
  return s;
}

#include "memory/retrieval_kernels_driver.h"

}  // namespace
}  // namespace rk_avx2

const RetrievalKernels* retrieval_kernels_avx2() {
  static const RetrievalKernels k{"avx2", rk_avx2::key_match_score,
                                  rk_avx2::proj_max_score};
  return &k;
}

#else  // CHANNEL_SIMD_AVX2

const RetrievalKernels* retrieval_kernels_avx2() {
  return nullptr;  // this compiler cannot target avx2
}

#endif  // CHANNEL_SIMD_AVX2

}  // namespace channel
