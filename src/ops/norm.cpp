#include "ops/norm.h"

#include <cmath>

#if defined(__AVX512F__) || defined(__AVX2__)
// GCC 12 warns about its own AVX-512 headers (_mm512_undefined_*); silence only those lines.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

namespace channel {

void rms_norm_ref(const float* x, const float* w, int64_t n, float eps, float* y) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * scale) * w[i];
}

namespace {

// Sum of x[i]^2 where each square is rounded to float and the sum kept in double, as in
// the reference; only the order of the additions differs.
double sum_squares(const float* x, int64_t n) {
  int64_t i = 0;
  double sum = 0.0;
#if defined(__AVX512F__)
  __m512d acc_lo = _mm512_setzero_pd();
  __m512d acc_hi = _mm512_setzero_pd();
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    const __m512 sq = _mm512_mul_ps(v, v);
    acc_lo = _mm512_add_pd(acc_lo, _mm512_cvtps_pd(_mm512_castps512_ps256(sq)));
    acc_hi = _mm512_add_pd(
        acc_hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(sq), 1))));
  }
  sum = _mm512_reduce_add_pd(_mm512_add_pd(acc_lo, acc_hi));
#elif defined(__AVX2__)
  __m256d acc = _mm256_setzero_pd();
  for (; i + 4 <= n; i += 4) {
    const __m128 v = _mm_loadu_ps(x + i);
    acc = _mm256_add_pd(acc, _mm256_cvtps_pd(_mm_mul_ps(v, v)));
  }
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, acc);
  sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
#endif
  for (; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  return sum;
}

}  // namespace

void rms_norm(const float* x, const float* w, int64_t n, float eps, float* y) {
  const float mean = static_cast<float>(sum_squares(x, n) / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  int64_t i = 0;
#if defined(__AVX512F__)
  const __m512 vs = _mm512_set1_ps(scale);
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x + i), vs);
    _mm512_storeu_ps(y + i, _mm512_mul_ps(v, _mm512_loadu_ps(w + i)));
  }
#elif defined(__AVX2__)
  const __m256 vs = _mm256_set1_ps(scale);
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), vs);
    _mm256_storeu_ps(y + i, _mm256_mul_ps(v, _mm256_loadu_ps(w + i)));
  }
#endif
  for (; i < n; ++i) y[i] = (x[i] * scale) * w[i];
}

}  // namespace channel
