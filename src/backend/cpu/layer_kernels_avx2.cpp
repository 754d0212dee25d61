// The AVX2 (+ FMA, F16C) variant of the layer kernels (layer_kernels.h): 8 floats per
// register, scalar tails, the f16 GELU table read by a gather.
#include <cmath>
#include <cstring>

#include "backend/cpu/layer_kernels.h"
#include "backend/cpu/simd.h"
#include "ops/activation.h"

namespace channel {

#if defined(CHANNEL_SIMD_AVX2)

namespace layer_avx2 {
namespace {

// Sum of x[i]^2 where each square is rounded to float and the sum kept in double, as in
// the reference; only the order of the additions differs.
double sum_squares(const float* x, int64_t n) {
  int64_t i = 0;
  __m256d acc = _mm256_setzero_pd();
  for (; i + 4 <= n; i += 4) {
    const __m128 v = _mm_loadu_ps(x + i);
    acc = _mm256_add_pd(acc, _mm256_cvtps_pd(_mm_mul_ps(v, v)));
  }
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, acc);
  double sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  for (; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  return sum;
}

using Vec = __m256;
constexpr int64_t kLanes = 8;
Vec load(const float* p) {
  return _mm256_loadu_ps(p);
}
void store(float* p, Vec v) {
  _mm256_storeu_ps(p, v);
}
Vec splat(float x) {
  return _mm256_set1_ps(x);
}
Vec add(Vec a, Vec b) {
  return _mm256_add_ps(a, b);
}
Vec mul(Vec a, Vec b) {
  return _mm256_mul_ps(a, b);
}
Vec div(Vec a, Vec b) {
  return _mm256_div_ps(a, b);
}
Vec neg(Vec a) {
  return _mm256_sub_ps(_mm256_setzero_ps(), a);
}
Vec exp(Vec a) {
  return simd::exp_ps(a);
}

#include "backend/cpu/layer_kernels_driver.h"

// As the reference: x rounded to f16 indexes the table, x >= 10 passes x, x <= -10 gives 0.
void gelu_tanh_glu(const float* gate, const float* up, int64_t n, float* out) {
  int64_t i = 0;
  const float* table = gelu_tanh_f16_table();
  const __m256 lo = _mm256_set1_ps(-10.0f), hi = _mm256_set1_ps(10.0f);
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(gate + i);
    const __m128i h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 g = _mm256_i32gather_ps(table, _mm256_cvtepu16_epi32(h), 4);
    g = _mm256_blendv_ps(g, x, _mm256_cmp_ps(x, hi, _CMP_GE_OQ));
    g = _mm256_and_ps(g, _mm256_cmp_ps(x, lo, _CMP_GT_OQ));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(g, _mm256_loadu_ps(up + i)));
  }
  gelu_tanh_glu_ref(gate + i, up + i, n - i, out + i);
}

// One 8-lane FMA chain, one reduction, then a scalar tail.
float dot(const float* a, const float* b, int n) {
  int i = 0;
  __m256 acc = _mm256_setzero_ps();
  for (; i + 8 <= n; i += 8)
    acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  float sum = simd::hsum(acc);
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// y += a * x, 8 lanes, then a scalar tail.
void axpy(float a, const float* x, float* y, int n) {
  int i = 0;
  const __m256 va = _mm256_set1_ps(a);
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += a * x[i];
}

void attend(const float* q, const AttentionHead& kv, std::span<const int32_t> slots, float scale,
            float* scores, float* out) {
  const int64_t n = static_cast<int64_t>(slots.size());
  for (int64_t j = 0; j < n; ++j)
    scores[j] = dot(q, kv.k + static_cast<int64_t>(slots[j]) * kv.head_dim_k, kv.head_dim_k);
  std::memset(out, 0, sizeof(float) * static_cast<size_t>(kv.head_dim_v));
  if (n == 0) return;
  softmax_scaled(scores, n, scale);
  for (int64_t j = 0; j < n; ++j)
    axpy(scores[j], kv.v + static_cast<int64_t>(slots[j]) * kv.head_dim_v, out, kv.head_dim_v);
}

}  // namespace
}  // namespace layer_avx2

const LayerKernels* layer_kernels_avx2_variant() {
  static const LayerKernels v{"avx2", layer_avx2::rms_norm, layer_avx2::silu_glu,
                              layer_avx2::gelu_tanh_glu, layer_avx2::attend};
  return &v;
}

#else  // CHANNEL_SIMD_AVX2

const LayerKernels* layer_kernels_avx2_variant() {
  return nullptr;  // this compiler cannot target avx2
}

#endif  // CHANNEL_SIMD_AVX2

}  // namespace channel
