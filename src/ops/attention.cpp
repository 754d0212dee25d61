#include "ops/attention.h"

#include <cmath>
#include <cstring>

#if defined(__AVX512F__) || defined(__AVX2__)
// GCC 12 warns about its own AVX-512 headers (_mm512_undefined_*); silence only those lines.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

namespace channel {

namespace {

// Softmax of scale * scores in place, with the sum kept in double (as llama.cpp does).
void softmax_scaled(float* scores, int64_t n, float scale) {
  float max = -INFINITY;
  for (int64_t j = 0; j < n; ++j) {
    scores[j] *= scale;
    if (scores[j] > max) max = scores[j];
  }
  double sum = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    scores[j] = std::exp(scores[j] - max);
    sum += scores[j];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t j = 0; j < n; ++j) scores[j] *= inv;
}

float dot(const float* a, const float* b, int n) {
  int i = 0;
  float sum = 0.0f;
#if defined(__AVX512F__)
  __m512 acc = _mm512_setzero_ps();
  for (; i + 16 <= n; i += 16)
    acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc);
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), acc);
    i = n;
  }
  sum = _mm512_reduce_add_ps(acc);
#elif defined(__AVX2__) && defined(__FMA__)
  __m256 acc = _mm256_setzero_ps();
  for (; i + 8 <= n; i += 8)
    acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  sum = _mm_cvtss_f32(s);
#endif
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// y += a * x
void axpy(float a, const float* x, float* y, int n) {
  int i = 0;
#if defined(__AVX512F__)
  const __m512 va = _mm512_set1_ps(a);
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
#elif defined(__AVX2__) && defined(__FMA__)
  const __m256 va = _mm256_set1_ps(a);
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
#endif
  for (; i < n; ++i) y[i] += a * x[i];
}

}  // namespace

void attend_ref(const float* q, const AttentionHead& kv, std::span<const int32_t> slots,
                float scale, float* scores, float* out) {
  const int64_t n = static_cast<int64_t>(slots.size());
  for (int64_t j = 0; j < n; ++j) {
    const float* k = kv.k + static_cast<int64_t>(slots[j]) * kv.head_dim_k;
    float s = 0.0f;
    for (int d = 0; d < kv.head_dim_k; ++d) s += q[d] * k[d];
    scores[j] = s;
  }
  for (int d = 0; d < kv.head_dim_v; ++d) out[d] = 0.0f;
  if (n == 0) return;
  softmax_scaled(scores, n, scale);
  for (int64_t j = 0; j < n; ++j) {
    const float* v = kv.v + static_cast<int64_t>(slots[j]) * kv.head_dim_v;
    for (int d = 0; d < kv.head_dim_v; ++d) out[d] += scores[j] * v[d];
  }
}

namespace {

#if defined(__AVX512F__)
// dot() of q with four keys at once: each key's chain is dot()'s (the same FMAs in the same
// order, the same masked tail and reduction), four chains side by side instead of one, whose
// FMA latency bounded the loop.
void dot4(const float* q, const float* const k[4], int n, float* out) {
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                   _mm512_setzero_ps()};
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 qv = _mm512_loadu_ps(q + i);
    for (int r = 0; r < 4; ++r) acc[r] = _mm512_fmadd_ps(qv, _mm512_loadu_ps(k[r] + i), acc[r]);
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 qv = _mm512_maskz_loadu_ps(m, q + i);
    for (int r = 0; r < 4; ++r)
      acc[r] = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(m, k[r] + i), acc[r]);
  }
  for (int r = 0; r < 4; ++r) out[r] = _mm512_reduce_add_ps(acc[r]);
}

// out[c] += scores[j] * v_j[c] over every key j in order, for the columns [c0, c0 + 16 * B):
// axpy()'s FMA per element and key, with the B accumulators kept in registers across the keys
// instead of stored and reloaded for each key.
template <int B>
void weighted_sum_block(const float* scores, const AttentionHead& kv,
                        std::span<const int32_t> slots, int c0, float* out) {
  __m512 acc[B];
  for (int b = 0; b < B; ++b) acc[b] = _mm512_loadu_ps(out + c0 + 16 * b);
  for (size_t j = 0; j < slots.size(); ++j) {
    const float* v = kv.v + static_cast<int64_t>(slots[j]) * kv.head_dim_v + c0;
    const __m512 s = _mm512_set1_ps(scores[j]);
    for (int b = 0; b < B; ++b) acc[b] = _mm512_fmadd_ps(s, _mm512_loadu_ps(v + 16 * b), acc[b]);
  }
  for (int b = 0; b < B; ++b) _mm512_storeu_ps(out + c0 + 16 * b, acc[b]);
}
#endif

}  // namespace

void attend(const float* q, const AttentionHead& kv, std::span<const int32_t> slots, float scale,
            float* scores, float* out) {
  const int64_t n = static_cast<int64_t>(slots.size());
  int64_t j = 0;
#if defined(__AVX512F__)
  for (; j + 4 <= n; j += 4) {
    const float* k[4];
    for (int r = 0; r < 4; ++r) k[r] = kv.k + static_cast<int64_t>(slots[j + r]) * kv.head_dim_k;
    dot4(q, k, kv.head_dim_k, scores + j);
  }
#endif
  for (; j < n; ++j)
    scores[j] = dot(q, kv.k + static_cast<int64_t>(slots[j]) * kv.head_dim_k, kv.head_dim_k);
  std::memset(out, 0, sizeof(float) * static_cast<size_t>(kv.head_dim_v));
  if (n == 0) return;
  softmax_scaled(scores, n, scale);
#if defined(__AVX512F__)
  if (kv.head_dim_v % 16 == 0) {  // else axpy's scalar tail below, element for element
    int c = 0;
    for (; c + 128 <= kv.head_dim_v; c += 128) weighted_sum_block<8>(scores, kv, slots, c, out);
    for (; c < kv.head_dim_v; c += 16) weighted_sum_block<1>(scores, kv, slots, c, out);
    return;
  }
#endif
  for (j = 0; j < n; ++j)
    axpy(scores[j], kv.v + static_cast<int64_t>(slots[j]) * kv.head_dim_v, out, kv.head_dim_v);
}

}  // namespace channel
