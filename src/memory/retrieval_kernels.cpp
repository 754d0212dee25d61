// SIMD versions of retrieval_kernels.h: AVX-512 (F/BW/VL) and AVX2+F16C, each f16 row widened
// once and dotted with every query head that reads it. Without those target flags each
// function is its scalar reference.
#include <algorithm>
#include <limits>

#include "memory/retrieval_kernels.h"

#if defined(__AVX2__)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#endif

namespace channel {

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define CHANNEL_RK_AVX512 1
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define CHANNEL_RK_AVX2 1
#endif

const char* retrieval_kernels_isa() {
#if defined(CHANNEL_RK_AVX512)
  return "avx512";
#elif defined(CHANNEL_RK_AVX2)
  return "avx2";
#else
  return "scalar";
#endif
}

#if defined(CHANNEL_RK_AVX512) || defined(CHANNEL_RK_AVX2)
namespace {

// Rows of up to this many values are widened into registers' worth of stack; longer ones
// take the reference (no model in sight has a head or retrieval dim above it).
constexpr size_t kMaxDim = 1024;

#if defined(CHANNEL_RK_AVX512)
inline float hsum(__m512 v) {
  return _mm512_reduce_add_ps(v);
}
// f16 row -> f32, dim values (tail zero-filled to a multiple of 16).
inline void widen(const uint16_t* row, size_t dim, float* out) {
  size_t i = 0;
  for (; i + 16 <= dim; i += 16)
    _mm512_storeu_ps(out + i,
                     _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + i))));
  if (i < dim) {
    const __mmask16 m = static_cast<__mmask16>((1u << (dim - i)) - 1u);
    _mm512_storeu_ps(out + i, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, row + i)));
  }
}
inline float dot(const float* a, const float* b, size_t dim) {
  __m512 d0 = _mm512_setzero_ps(), d1 = _mm512_setzero_ps();
  size_t i = 0;
  for (; i + 32 <= dim; i += 32) {
    d0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), d0);
    d1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), d1);
  }
  for (; i + 16 <= dim; i += 16)
    d0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), d0);
  if (i < dim) {
    const __mmask16 m = static_cast<__mmask16>((1u << (dim - i)) - 1u);
    d1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), d1);
  }
  return hsum(_mm512_add_ps(d0, d1));
}
#else
inline float hsum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 h = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
}
inline void widen(const uint16_t* row, size_t dim, float* out) {
  size_t i = 0;
  for (; i + 8 <= dim; i += 8)
    _mm256_storeu_ps(out + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + i))));
  for (; i < dim; ++i) out[i] = _cvtsh_ss(row[i]);
}
inline float dot(const float* a, const float* b, size_t dim) {
  __m256 d0 = _mm256_setzero_ps(), d1 = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 16 <= dim; i += 16) {
    d0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), d0);
    d1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), d1);
  }
  for (; i + 8 <= dim; i += 8)
    d0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), d0);
  float s = hsum(_mm256_add_ps(d0, d1));
  for (; i < dim; ++i) s += a[i] * b[i];
  return s;
}
#endif

}  // namespace

float key_match_score(const float* q, const uint16_t* keys, size_t n_blocks, size_t group,
                      size_t R, size_t dim) {
  if (dim > kMaxDim || group > 64) return key_match_score_ref(q, keys, n_blocks, group, R, dim);
  alignas(64) float k[kMaxDim + 16];
  float best[64];
  float total = 0.0f;
  for (size_t b = 0; b < n_blocks; ++b) {
    std::fill_n(best, group, -std::numeric_limits<float>::infinity());
    for (size_t r = 0; r < R; ++r) {
      widen(keys + (b * R + r) * dim, dim, k);  // once, for every query head of the group
      for (size_t g = 0; g < group; ++g)
        best[g] = std::max(best[g], dot(q + (b * group + g) * dim, k, dim));
    }
    for (size_t g = 0; g < group; ++g) total += best[g];
  }
  return total;
}

float proj_max_score(const float* c, const uint16_t* rows, size_t n, size_t dim) {
  if (dim > kMaxDim) return proj_max_score_ref(c, rows, n, dim);
  alignas(64) float e[kMaxDim + 16];
  float best = -std::numeric_limits<float>::infinity();
  for (size_t t = 0; t < n; ++t) {
    widen(rows + t * dim, dim, e);
    best = std::max(best, dot(c, e, dim));
  }
  return best;
}

#else

float key_match_score(const float* q, const uint16_t* keys, size_t n_blocks, size_t group,
                      size_t R, size_t dim) {
  return key_match_score_ref(q, keys, n_blocks, group, R, dim);
}
float proj_max_score(const float* c, const uint16_t* rows, size_t n, size_t dim) {
  return proj_max_score_ref(c, rows, n, dim);
}

#endif

}  // namespace channel
