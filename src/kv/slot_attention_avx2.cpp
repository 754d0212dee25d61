// The AVX2 variant of slot_attention: rows 8 values at a time, scalar tails.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/simd.h"
#include "kv/slot_attention.h"
#include "ops/fp16.h"

namespace channel {

#if defined(CHANNEL_SIMD_AVX2)

namespace kv_avx2 {
namespace {

// 8 values of a row widened to f32 (f16 through F16C), and one value.
__m256 load8(const float* x) {
  return _mm256_loadu_ps(x);
}
__m256 load8(const uint16_t* x) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x)));
}
float value(float x) {
  return x;
}
float value(uint16_t x) {
  return fp16_to_fp32(x);
}

template <typename T>
float dot(const float* a, const T* b, uint32_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  uint32_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), load8(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), load8(b + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), load8(b + i), acc0);
  float s = simd::hsum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) s += a[i] * value(b[i]);
  return s;
}

template <typename T>
void axpy(float* y, const T* x, float w, uint32_t n) {
  const __m256 vw = _mm256_set1_ps(w);
  uint32_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(vw, load8(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += w * value(x[i]);
}

float softmax_numerators(float* s, size_t n) {
  float mx = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < n; ++i) mx = std::max(mx, s[i]);
  const __m256 vm = _mm256_set1_ps(mx);
  __m256 vsum = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = simd::exp_ps(_mm256_sub_ps(_mm256_loadu_ps(s + i), vm));
    _mm256_storeu_ps(s + i, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  float sum = simd::hsum(vsum);
  for (; i < n; ++i) {
    s[i] = std::exp(s[i] - mx);
    sum += s[i];
  }
  return sum;
}

#include "kv/slot_attention_kernel.h"

}  // namespace
}  // namespace kv_avx2

const SlotAttentionVariant* slot_attention_avx2_variant() {
  static const SlotAttentionVariant v{"avx2", kv_avx2::slot_attention_kernel};
  return &v;
}

#else  // CHANNEL_SIMD_AVX2

const SlotAttentionVariant* slot_attention_avx2_variant() {
  return nullptr;  // this compiler cannot target avx2
}

#endif  // CHANNEL_SIMD_AVX2

}  // namespace channel
