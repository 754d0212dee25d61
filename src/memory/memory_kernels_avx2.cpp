// The AVX2 + F16C variants of the centroid scan, f32 -> f16 rows and the int8 scan
// (memory_kernels.h).
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

// vpmaddubsw also takes unsigned x signed bytes: |c| times q with c's sign. Pairs of products
// are summed in int16, at most 2 * 128 * 127 in magnitude (no saturation since |q| <= 127).
void int8_dots(const int8_t* rows, size_t stride, size_t n, const int8_t* q, size_t dim,
               int32_t* dots) {
  const __m256i ones = _mm256_set1_epi16(1);
  for (size_t r = 0; r < n; ++r) {
    const int8_t* row = rows + r * stride;
    __m256i acc = _mm256_setzero_si256();
    size_t i = 0;
    for (; i + 32 <= dim; i += 32) {
      const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + i));
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + i));
      const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(c), _mm256_sign_epi8(x, c));
      acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, ones));
    }
    int32_t sum = simd::hsum_i32(acc);
    if (i < dim) {
      int32_t t = 0;
      int8_dots_ref(row + i, 0, 1, q + i, dim - i, &t);
      sum += t;
    }
    dots[r] = sum;
  }
}

}  // namespace
}  // namespace mem_avx2

const CentroidKernels* centroid_kernels_avx2() {
  static const CentroidKernels k{"avx2", mem_avx2::centroid_dots, mem_avx2::f32_to_f16_row};
  return &k;
}

const Int8DotsVariant* int8_dots_avx2_variant() {
  static const Int8DotsVariant v{"avx2", mem_avx2::int8_dots};
  return &v;
}

#else  // CHANNEL_SIMD_AVX2

const CentroidKernels* centroid_kernels_avx2() {
  return nullptr;  // this compiler cannot target avx2
}

const Int8DotsVariant* int8_dots_avx2_variant() {
  return nullptr;
}

#endif  // CHANNEL_SIMD_AVX2

}  // namespace channel
