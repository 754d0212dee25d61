// The AVX-512 variant of the layer kernels (layer_kernels.h): 16 floats per register, masked
// tails, the f16 GELU table read by a gather.
#include <cmath>
#include <cstring>

#include "backend/cpu/layer_kernels.h"
#include "backend/cpu/simd.h"
#include "ops/activation.h"

namespace channel {

#if defined(CHANNEL_SIMD_AVX512)

namespace layer_avx512 {
namespace {

// Sum of x[i]^2 where each square is rounded to float and the sum kept in double, as in
// the reference; only the order of the additions differs.
double sum_squares(const float* x, int64_t n) {
  int64_t i = 0;
  __m512d acc_lo = _mm512_setzero_pd();
  __m512d acc_hi = _mm512_setzero_pd();
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    const __m512 sq = _mm512_mul_ps(v, v);
    acc_lo = _mm512_add_pd(acc_lo, _mm512_cvtps_pd(_mm512_castps512_ps256(sq)));
    acc_hi = _mm512_add_pd(
        acc_hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(sq), 1))));
  }
  double sum = _mm512_reduce_add_pd(_mm512_add_pd(acc_lo, acc_hi));
  for (; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  return sum;
}

using Vec = __m512;
constexpr int64_t kLanes = 16;
Vec load(const float* p) {
  return _mm512_loadu_ps(p);
}
void store(float* p, Vec v) {
  _mm512_storeu_ps(p, v);
}
Vec splat(float x) {
  return _mm512_set1_ps(x);
}
Vec add(Vec a, Vec b) {
  return _mm512_add_ps(a, b);
}
Vec mul(Vec a, Vec b) {
  return _mm512_mul_ps(a, b);
}
Vec div(Vec a, Vec b) {
  return _mm512_div_ps(a, b);
}
Vec neg(Vec a) {
  return _mm512_sub_ps(_mm512_setzero_ps(), a);
}
Vec exp(Vec a) {
  return simd::exp_ps(a);
}

#include "backend/cpu/layer_kernels_driver.h"

void gelu_tanh_glu(const float* gate, const float* up, int64_t n, float* out) {
  int64_t i = 0;
  const float* table = gelu_tanh_f16_table();
  const __m512 lo = _mm512_set1_ps(-10.0f), hi = _mm512_set1_ps(10.0f);
  for (; i + 16 <= n; i += 16) {
    const __m512 x = _mm512_loadu_ps(gate + i);
    const __m256i h = _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 g = _mm512_i32gather_ps(_mm512_cvtepu16_epi32(h), table, 4);
    g = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, hi, _CMP_GE_OQ), g, x);
    g = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, lo, _CMP_GT_OQ), g);
    _mm512_storeu_ps(out + i, _mm512_mul_ps(g, _mm512_loadu_ps(up + i)));
  }
  gelu_tanh_glu_ref(gate + i, up + i, n - i, out + i);
}

// One 16-lane FMA chain, a masked tail, one reduction.
float dot(const float* a, const float* b, int n) {
  int i = 0;
  __m512 acc = _mm512_setzero_ps();
  for (; i + 16 <= n; i += 16)
    acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc);
  if (i < n) {
    const __mmask16 m = simd::tail_mask16(static_cast<size_t>(n - i));
    acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), acc);
  }
  return simd::hsum(acc);
}

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
    const __mmask16 m = simd::tail_mask16(static_cast<size_t>(n - i));
    const __m512 qv = _mm512_maskz_loadu_ps(m, q + i);
    for (int r = 0; r < 4; ++r)
      acc[r] = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(m, k[r] + i), acc[r]);
  }
  for (int r = 0; r < 4; ++r) out[r] = simd::hsum(acc[r]);
}

// y += a * x, 16 lanes, then a scalar tail.
void axpy(float a, const float* x, float* y, int n) {
  int i = 0;
  const __m512 va = _mm512_set1_ps(a);
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += a * x[i];
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

void attend(const float* q, const AttentionHead& kv, std::span<const int32_t> slots, float scale,
            float* scores, float* out) {
  const int64_t n = static_cast<int64_t>(slots.size());
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const float* k[4];
    for (int r = 0; r < 4; ++r) k[r] = kv.k + static_cast<int64_t>(slots[j + r]) * kv.head_dim_k;
    dot4(q, k, kv.head_dim_k, scores + j);
  }
  for (; j < n; ++j)
    scores[j] = dot(q, kv.k + static_cast<int64_t>(slots[j]) * kv.head_dim_k, kv.head_dim_k);
  std::memset(out, 0, sizeof(float) * static_cast<size_t>(kv.head_dim_v));
  if (n == 0) return;
  softmax_scaled(scores, n, scale);
  if (kv.head_dim_v % 16 == 0) {  // else axpy's scalar tail below, element for element
    int c = 0;
    for (; c + 128 <= kv.head_dim_v; c += 128) weighted_sum_block<8>(scores, kv, slots, c, out);
    for (; c < kv.head_dim_v; c += 16) weighted_sum_block<1>(scores, kv, slots, c, out);
    return;
  }
  for (j = 0; j < n; ++j)
    axpy(scores[j], kv.v + static_cast<int64_t>(slots[j]) * kv.head_dim_v, out, kv.head_dim_v);
}

}  // namespace
}  // namespace layer_avx512

const LayerKernels* layer_kernels_avx512_variant() {
  static const LayerKernels v{"avx512", layer_avx512::rms_norm, layer_avx512::silu_glu,
                              layer_avx512::gelu_tanh_glu, layer_avx512::attend};
  return &v;
}

#else  // CHANNEL_SIMD_AVX512

const LayerKernels* layer_kernels_avx512_variant() {
  return nullptr;  // this compiler cannot target avx512
}

#endif  // CHANNEL_SIMD_AVX512

}  // namespace channel
