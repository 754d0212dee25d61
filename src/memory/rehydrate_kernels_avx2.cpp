// The AVX2 + FMA + F16C (scalar tails) variant of the rehydration kernels
// (rehydrate_kernels.h). Each value takes the same operations as in the scalar reference (an
// fma of the value and cos with the rounded partner * sin product), so results are
// bit-identical to it.
#include <cmath>

#include "backend/cpu/simd.h"
#include "memory/rehydrate_kernels.h"
#include "ops/fp16.h"

namespace channel {

#if defined(CHANNEL_SIMD_AVX2)

namespace rh_avx2 {
namespace {

inline __m256 load8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 load8(const float* p) {
  return _mm256_loadu_ps(p);
}
inline float value_of(const uint16_t* p) {
  return fp16_to_fp32(*p);
}
inline float value_of(const float* p) {
  return *p;
}
inline void put8(float* p, __m256 v) {
  _mm256_storeu_ps(p, v);
}
inline void put8(uint16_t* p, __m256 v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                   _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
inline void put1(float* p, float v) {
  *p = v;
}
inline void put1(uint16_t* p, float v) {
  *p = fp32_to_fp16(v);
}

// Every value is read before its own store and its partner's, so y may be x.
template <typename T, typename U>
inline void head(const HeadRotation* rot, const T* x, uint32_t head_dim, U* y) {
  uint32_t d = 0;
  if (rot) {
    const uint32_t n_rot = rot->n_rot, half = n_rot / 2;
    const float *c = rot->c, *s = rot->s;
    if (rot->neox) {
      uint32_t i = 0;
      for (; i + 8 <= half; i += 8) {
        const __m256 a = load8(x + i), b = load8(x + half + i);
        put8(y + i,
             _mm256_fmadd_ps(a, _mm256_loadu_ps(c + i), _mm256_mul_ps(b, _mm256_loadu_ps(s + i))));
        put8(y + half + i, _mm256_fmadd_ps(b, _mm256_loadu_ps(c + half + i),
                                           _mm256_mul_ps(a, _mm256_loadu_ps(s + half + i))));
      }
      for (; i < half; ++i) {
        const float a = value_of(x + i), b = value_of(x + half + i);
        put1(y + i, std::fma(a, c[i], b * s[i]));
        put1(y + half + i, std::fma(b, c[half + i], a * s[half + i]));
      }
    } else {
      uint32_t i = 0;
      for (; i + 8 <= n_rot; i += 8) {
        const __m256 a = load8(x + i);
        const __m256 b = _mm256_permute_ps(a, 0xB1);
        put8(y + i,
             _mm256_fmadd_ps(a, _mm256_loadu_ps(c + i), _mm256_mul_ps(b, _mm256_loadu_ps(s + i))));
      }
      for (; i < n_rot; i += 2) {  // whole pairs (i is even), both read before either store
        const float a = value_of(x + i), b = value_of(x + i + 1);
        put1(y + i, std::fma(a, c[i], b * s[i]));
        put1(y + i + 1, std::fma(b, c[i + 1], a * s[i + 1]));
      }
    }
    d = n_rot;
  }
  for (; d + 8 <= head_dim; d += 8) put8(y + d, load8(x + d));
  for (; d < head_dim; ++d) put1(y + d, value_of(x + d));
}

// No whole-row specialisations: every layout goes head by head.
template <typename T, typename U>
bool rows_fast(const HeadRotation*, const T*, size_t, const RowLayout&, U*) {
  return false;
}

#include "memory/rehydrate_kernels_driver.h"

}  // namespace

void compose_rotations(double* c, double* s, const double* C, const double* S, size_t n) {
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m256d c0 = _mm256_loadu_pd(c + i), s0 = _mm256_loadu_pd(s + i);
    const __m256d Ci = _mm256_loadu_pd(C + i), Si = _mm256_loadu_pd(S + i);
    _mm256_storeu_pd(c + i, _mm256_fmsub_pd(c0, Ci, _mm256_mul_pd(s0, Si)));
    _mm256_storeu_pd(s + i, _mm256_fmadd_pd(s0, Ci, _mm256_mul_pd(c0, Si)));
  }
  compose_rotations_ref(c + i, s + i, C + i, S + i, n - i);
}

void chain_rotations(const double* const* C, const double* const* S, int n_factors, size_t n,
                     double* c, double* s) {
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    __m256d ci = _mm256_loadu_pd(C[0] + i), si = _mm256_loadu_pd(S[0] + i);
    for (int j = 1; j < n_factors; ++j) {
      const __m256d Cj = _mm256_loadu_pd(C[j] + i), Sj = _mm256_loadu_pd(S[j] + i);
      const __m256d nc = _mm256_fmsub_pd(ci, Cj, _mm256_mul_pd(si, Sj));
      si = _mm256_fmadd_pd(si, Cj, _mm256_mul_pd(ci, Sj));
      ci = nc;
    }
    _mm256_storeu_pd(c + i, ci);
    _mm256_storeu_pd(s + i, si);
  }
  for (; i < n; ++i) {  // the same operations one lane at a time
    double ci = C[0][i], si = S[0][i];
    for (int j = 1; j < n_factors; ++j) {
      const double nc = std::fma(ci, C[j][i], -(si * S[j][i]));
      si = std::fma(si, C[j][i], ci * S[j][i]);
      ci = nc;
    }
    c[i] = ci;
    s[i] = si;
  }
}

void expand_rotation(bool neox, uint32_t n_rot, const double* cos, const double* sin, float* c,
                     float* s) {
  expand_rotation_ref(neox, n_rot, cos, sin, c, s);
}

}  // namespace rh_avx2

const RehydrateKernels* rehydrate_kernels_avx2() {
  static const RehydrateKernels k{"avx2",
                                  rh_avx2::f16_rows_to_f32,
                                  rh_avx2::f32_rows_to_f32,
                                  rh_avx2::f16_rows_to_f16,
                                  rh_avx2::compose_rotations,
                                  rh_avx2::chain_rotations,
                                  rh_avx2::expand_rotation};
  return &k;
}

#else  // CHANNEL_SIMD_AVX2

const RehydrateKernels* rehydrate_kernels_avx2() {
  return nullptr;  // this compiler cannot target avx2
}

#endif  // CHANNEL_SIMD_AVX2

}  // namespace channel
