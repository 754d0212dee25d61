// The AVX-512 variant of slot_attention: rows 16 values at a time, masked tails.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/simd.h"
#include "kv/slot_attention.h"
#include "ops/fp16.h"

namespace channel {

#if defined(CHANNEL_SIMD_AVX512)

namespace kv_avx512 {
namespace {

// 16 values of a row widened to f32: f32 rows as they are, f16 rows converted exactly.
__m512 load16(const float* x) {
  return _mm512_loadu_ps(x);
}
__m512 load16(const uint16_t* x) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)));
}

// The first n < 16 values widened, the rest zero; reads nothing past x + n.
__m512 load16_tail(const float* x, uint32_t n) {
  return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1), x);
}
__m512 load16_tail(const uint16_t* x, uint32_t n) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(static_cast<__mmask16>((1u << n) - 1), x));
}

// a . b over n values; b is a K row, f32 or f16.
template <typename T>
float dot(const float* a, const T* b, uint32_t n) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  uint32_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), load16(b + i), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), load16(b + i + 16), acc1);
  }
  for (; i + 16 <= n; i += 16) acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), load16(b + i), acc0);
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    acc1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), load16_tail(b + i, n - i), acc1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

// y += w x; x is a V row, f32 or f16.
template <typename T>
void axpy(float* y, const T* x, float w, uint32_t n) {
  const __m512 vw = _mm512_set1_ps(w);
  uint32_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, _mm512_fmadd_ps(vw, load16(x + i), _mm512_loadu_ps(y + i)));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(
        y + i, m, _mm512_fmadd_ps(vw, load16_tail(x + i, n - i), _mm512_maskz_loadu_ps(m, y + i)));
  }
}

// s[i] <- exp(s[i] - max); returns the sum.
float softmax_numerators(float* s, size_t n) {
  __m512 vmax = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  size_t i = 0;
  for (; i + 16 <= n; i += 16) vmax = _mm512_max_ps(vmax, _mm512_loadu_ps(s + i));
  float mx = _mm512_reduce_max_ps(vmax);
  for (; i < n; ++i) mx = std::max(mx, s[i]);
  const __m512 vm = _mm512_set1_ps(mx);
  __m512 vsum = _mm512_setzero_ps();
  for (i = 0; i + 16 <= n; i += 16) {
    const __m512 e = simd::exp_ps(_mm512_sub_ps(_mm512_loadu_ps(s + i), vm));
    _mm512_storeu_ps(s + i, e);
    vsum = _mm512_add_ps(vsum, e);
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 e = simd::exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, s + i), vm));
    _mm512_mask_storeu_ps(s + i, m, e);
    vsum = _mm512_add_ps(vsum, _mm512_maskz_mov_ps(m, e));
  }
  return _mm512_reduce_add_ps(vsum);
}

#include "kv/slot_attention_kernel.h"

}  // namespace
}  // namespace kv_avx512

const SlotAttentionVariant* slot_attention_avx512_variant() {
  static const SlotAttentionVariant v{"avx512", kv_avx512::slot_attention_kernel};
  return &v;
}

#else  // CHANNEL_SIMD_AVX512

const SlotAttentionVariant* slot_attention_avx512_variant() {
  return nullptr;  // this compiler cannot target avx512
}

#endif  // CHANNEL_SIMD_AVX512

}  // namespace channel
