// The AVX-512 (F/BW/VL) variants of the retrieval scans (retrieval_kernels.h): each f16 row
// widened once and dotted with every query head that reads it.
#include <algorithm>
#include <limits>

#include "backend/cpu/simd.h"
#include "memory/retrieval_kernels.h"

namespace channel {

#if defined(CHANNEL_SIMD_AVX512)

namespace rk_avx512 {
namespace {

// f16 row -> f32, dim values (tail zero-filled to a multiple of 16).
void widen(const uint16_t* row, size_t dim, float* out) {
  size_t i = 0;
  for (; i + 16 <= dim; i += 16)
    _mm512_storeu_ps(out + i,
                     _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + i))));
  if (i < dim) {
    const __mmask16 m = simd::tail_mask16(dim - i);
    _mm512_storeu_ps(out + i, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, row + i)));
  }
}

float dot(const float* a, const float* b, size_t dim) {
  __m512 d0 = _mm512_setzero_ps(), d1 = _mm512_setzero_ps();
  size_t i = 0;
  for (; i + 32 <= dim; i += 32) {
    d0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), d0);
    d1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), d1);
  }
  for (; i + 16 <= dim; i += 16)
    d0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), d0);
  if (i < dim) {
    const __mmask16 m = simd::tail_mask16(dim - i);
    d1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), d1);
  }
  return simd::hsum(_mm512_add_ps(d0, d1));
}

#include "memory/retrieval_kernels_driver.h"

}  // namespace
}  // namespace rk_avx512

const RetrievalKernels* retrieval_kernels_avx512() {
  static const RetrievalKernels k{"avx512", rk_avx512::key_match_score,
                                  rk_avx512::proj_max_score};
  return &k;
}

#else  // CHANNEL_SIMD_AVX512

const RetrievalKernels* retrieval_kernels_avx512() {
  return nullptr;  // this compiler cannot target avx512
}

#endif  // CHANNEL_SIMD_AVX512

}  // namespace channel
