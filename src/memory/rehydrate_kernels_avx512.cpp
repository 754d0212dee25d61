// The AVX-512 (F/BW/VL, masked tails) variant of the rehydration kernels
// (rehydrate_kernels.h). Each value takes the same operations as in the scalar reference (an
// fma of the value and cos with the rounded partner * sin product), so results are
// bit-identical to it.
#include <cmath>

#include "backend/cpu/simd.h"
#include "memory/rehydrate_kernels.h"
#include "ops/fp16.h"

namespace channel {

#if defined(CHANNEL_SIMD_AVX512)

namespace rh_avx512 {
namespace {

inline __mmask16 mask16(uint32_t left) {  // left > 0: the first min(left, 16) lanes
  return left >= 16 ? __mmask16(0xFFFF) : simd::tail_mask16(left);
}
inline __m512 load16(const uint16_t* p, __mmask16 m) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}
inline __m512 load16(const float* p, __mmask16 m) {
  return _mm512_maskz_loadu_ps(m, p);
}
constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
inline void put16(float* p, __mmask16 m, __m512 v) {
  _mm512_mask_storeu_ps(p, m, v);
}
inline void put16(uint16_t* p, __mmask16 m, __m512 v) {
  _mm256_mask_storeu_epi16(p, m, _mm512_cvtps_ph(v, kNearest));
}

// One head: x [head_dim] (f16 or f32) -> y [head_dim] (f32 or f16). Each vector of lanes is
// loaded before it is stored, so y may be x.
template <typename T, typename U>
inline void head(const HeadRotation* rot, const T* x, uint32_t head_dim, U* y) {
  uint32_t d = 0;
  if (rot) {
    const uint32_t n_rot = rot->n_rot, half = n_rot / 2;
    const float *c = rot->c, *s = rot->s;
    if (rot->neox) {  // lanes d.. of the first half pair with lanes half + d..
      for (uint32_t i = 0; i < half; i += 16) {
        const __mmask16 m = mask16(half - i);
        const __m512 a = load16(x + i, m), b = load16(x + half + i, m);
        const __m512 ya = _mm512_fmadd_ps(a, _mm512_maskz_loadu_ps(m, c + i),
                                          _mm512_mul_ps(b, _mm512_maskz_loadu_ps(m, s + i)));
        const __m512 yb = _mm512_fmadd_ps(b, _mm512_maskz_loadu_ps(m, c + half + i),
                                          _mm512_mul_ps(a, _mm512_maskz_loadu_ps(m, s + half + i)));
        put16(y + i, m, ya);
        put16(y + half + i, m, yb);
      }
    } else {  // partners are neighbours: swap each pair of lanes (n_rot is even)
      for (uint32_t i = 0; i < n_rot; i += 16) {
        const __mmask16 m = mask16(n_rot - i);
        const __m512 a = load16(x + i, m);
        const __m512 b = _mm512_permute_ps(a, 0xB1);
        const __m512 ya = _mm512_fmadd_ps(a, _mm512_maskz_loadu_ps(m, c + i),
                                          _mm512_mul_ps(b, _mm512_maskz_loadu_ps(m, s + i)));
        put16(y + i, m, ya);
      }
    }
    d = n_rot;
  }
  for (; d < head_dim; d += 16) {
    const __mmask16 m = mask16(head_dim - d);
    put16(y + d, m, load16(x + d, m));
  }
}

template <typename T>
inline __m512 load_full(const T* p) {
  return load16(p, __mmask16(0xFFFF));
}

template <bool kStream>
inline void store16(float* p, __m512 v) {
  if constexpr (kStream) {
    _mm512_stream_ps(p, v);
  } else {
    _mm512_storeu_ps(p, v);
  }
}
template <bool kStream>
inline void store16(uint16_t* p, __m512 v) {
  static_assert(!kStream, "f16 rows are never streamed");
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(v, kNearest));
}

// The common heads (64, 128 or 256 dims, rotated whole or not at all), unrolled with the
// angles held in registers. kMode: 0 values (copy), 1 NEOX, 2 NORMAL.
template <int kHeadDim, int kMode, bool kStream, typename T, typename U>
void rows_fixed(const HeadRotation* rot, const T* src, size_t n, const RowLayout& out, U* dst) {
  constexpr int V = kHeadDim / 16;
  __m512 c[V], s[V];
  for (int i = 0; i < V; ++i) {
    c[i] = kMode ? _mm512_loadu_ps(rot->c + 16 * i) : _mm512_setzero_ps();
    s[i] = kMode ? _mm512_loadu_ps(rot->s + 16 * i) : _mm512_setzero_ps();
  }
  for (size_t t = 0; t < n; ++t) {
    for (uint32_t h = 0; h < out.n_heads; ++h) {
      const T* x = src + (t * out.n_heads + h) * kHeadDim;
      U* y = dst + t * out.token_stride + h * out.head_stride;
      __m512 v[V];  // the whole head is loaded before any store: dst may be src
      for (int i = 0; i < V; ++i) v[i] = load_full(x + 16 * i);
      if constexpr (kMode == 1) {
        for (int i = 0; i < V / 2; ++i) {
          const int j = i + V / 2;
          store16<kStream>(y + 16 * i, _mm512_fmadd_ps(v[i], c[i], _mm512_mul_ps(v[j], s[i])));
          store16<kStream>(y + 16 * j, _mm512_fmadd_ps(v[j], c[j], _mm512_mul_ps(v[i], s[j])));
        }
      } else if constexpr (kMode == 2) {
        for (int i = 0; i < V; ++i)
          store16<kStream>(
              y + 16 * i,
              _mm512_fmadd_ps(v[i], c[i], _mm512_mul_ps(_mm512_permute_ps(v[i], 0xB1), s[i])));
      } else {
        for (int i = 0; i < V; ++i) store16<kStream>(y + 16 * i, v[i]);
      }
    }
  }
  if constexpr (kStream) _mm_sfence();  // ordered before whatever reads the rows next
}

template <int kHeadDim, bool kStream, typename T, typename U>
void rows_fixed_mode(const HeadRotation* rot, const T* src, size_t n, const RowLayout& out,
                     U* dst) {
  if (!rot) {
    rows_fixed<kHeadDim, 0, kStream>(rot, src, n, out, dst);
  } else if (rot->neox) {
    rows_fixed<kHeadDim, 1, kStream>(rot, src, n, out, dst);
  } else {
    rows_fixed<kHeadDim, 2, kStream>(rot, src, n, out, dst);
  }
}

template <int kHeadDim, typename T>
void rows_fixed_any(const HeadRotation* rot, const T* src, size_t n, const RowLayout& out,
                    uint16_t* dst) {
  rows_fixed_mode<kHeadDim, false>(rot, src, n, out, dst);
}

template <int kHeadDim, typename T>
void rows_fixed_any(const HeadRotation* rot, const T* src, size_t n, const RowLayout& out,
                    float* dst) {
  // Streaming needs every vector 64-byte aligned: the base and both strides.
  const bool aligned = reinterpret_cast<uintptr_t>(dst) % 64 == 0 && out.token_stride % 16 == 0 &&
                       out.head_stride % 16 == 0;
  if (out.stream && aligned) {
    rows_fixed_mode<kHeadDim, true>(rot, src, n, out, dst);
  } else {
    rows_fixed_mode<kHeadDim, false>(rot, src, n, out, dst);
  }
}

// Heads of 64, 128 or 256 dims rotated whole or not at all: the unrolled rows_fixed.
template <typename T, typename U>
bool rows_fast(const HeadRotation* rot, const T* src, size_t n, const RowLayout& out, U* dst) {
  if (rot && rot->n_rot != out.head_dim) return false;
  switch (out.head_dim) {
    case 64:
      rows_fixed_any<64>(rot, src, n, out, dst);
      return true;
    case 128:
      rows_fixed_any<128>(rot, src, n, out, dst);
      return true;
    case 256:
      rows_fixed_any<256>(rot, src, n, out, dst);
      return true;
    default:
      return false;
  }
}

#include "memory/rehydrate_kernels_driver.h"

}  // namespace

void compose_rotations(double* c, double* s, const double* C, const double* S, size_t n) {
  for (size_t i = 0; i < n; i += 8) {
    const __mmask8 m = n - i >= 8 ? __mmask8(0xFF) : static_cast<__mmask8>((1u << (n - i)) - 1u);
    const __m512d c0 = _mm512_maskz_loadu_pd(m, c + i), s0 = _mm512_maskz_loadu_pd(m, s + i);
    const __m512d Ci = _mm512_maskz_loadu_pd(m, C + i), Si = _mm512_maskz_loadu_pd(m, S + i);
    // fmsub(a, b, t) = a * b - t rounded once: fma(c, C, -(s * S)).
    _mm512_mask_storeu_pd(c + i, m, _mm512_fmsub_pd(c0, Ci, _mm512_mul_pd(s0, Si)));
    _mm512_mask_storeu_pd(s + i, m, _mm512_fmadd_pd(s0, Ci, _mm512_mul_pd(c0, Si)));
  }
}

void chain_rotations(const double* const* C, const double* const* S, int n_factors, size_t n,
                     double* c, double* s) {
  for (size_t i = 0; i < n; i += 8) {
    const __mmask8 m = n - i >= 8 ? __mmask8(0xFF) : static_cast<__mmask8>((1u << (n - i)) - 1u);
    __m512d ci = _mm512_maskz_loadu_pd(m, C[0] + i), si = _mm512_maskz_loadu_pd(m, S[0] + i);
    for (int j = 1; j < n_factors; ++j) {
      const __m512d Cj = _mm512_maskz_loadu_pd(m, C[j] + i),
                    Sj = _mm512_maskz_loadu_pd(m, S[j] + i);
      const __m512d nc = _mm512_fmsub_pd(ci, Cj, _mm512_mul_pd(si, Sj));
      si = _mm512_fmadd_pd(si, Cj, _mm512_mul_pd(ci, Sj));
      ci = nc;
    }
    _mm512_mask_storeu_pd(c + i, m, ci);
    _mm512_mask_storeu_pd(s + i, m, si);
  }
}

void expand_rotation(bool neox, uint32_t n_rot, const double* cos, const double* sin, float* c,
                     float* s) {
  const uint32_t half = n_rot / 2;
  if (!neox) return expand_rotation_ref(neox, n_rot, cos, sin, c, s);
  for (uint32_t i = 0; i < half; i += 8) {  // NEOX: pair i is (i, i + half)
    const __mmask8 m =
        half - i >= 8 ? __mmask8(0xFF) : static_cast<__mmask8>((1u << (half - i)) - 1u);
    const __m256 cf = _mm512_cvtpd_ps(_mm512_maskz_loadu_pd(m, cos + i));
    const __m256 sf = _mm512_cvtpd_ps(_mm512_maskz_loadu_pd(m, sin + i));
    _mm256_mask_storeu_ps(c + i, m, cf);
    _mm256_mask_storeu_ps(c + half + i, m, cf);
    _mm256_mask_storeu_ps(s + i, m, _mm256_xor_ps(sf, _mm256_set1_ps(-0.0f)));  // exact -sin
    _mm256_mask_storeu_ps(s + half + i, m, sf);
  }
}

}  // namespace rh_avx512

const RehydrateKernels* rehydrate_kernels_avx512() {
  static const RehydrateKernels k{"avx512",
                                  rh_avx512::f16_rows_to_f32,
                                  rh_avx512::f32_rows_to_f32,
                                  rh_avx512::f16_rows_to_f16,
                                  rh_avx512::compose_rotations,
                                  rh_avx512::chain_rotations,
                                  rh_avx512::expand_rotation};
  return &k;
}

#else  // CHANNEL_SIMD_AVX512

const RehydrateKernels* rehydrate_kernels_avx512() {
  return nullptr;  // this compiler cannot target avx512
}

#endif  // CHANNEL_SIMD_AVX512

}  // namespace channel
