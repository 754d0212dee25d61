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

// Rows of up to this many values are widened into registers' worth of stack; longer ones
// take the reference (no model in sight has a head or retrieval dim above it).
constexpr size_t kMaxDim = 1024;

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
