// simd.h: the one SIMD layer of the CPU kernels (in the spirit of ggml's simd-mappings.h):
// the intrinsics preamble, the ISA macros and the helpers every kernel family shares.
//
// ISA macros: what the compiler may use in this translation unit (its -m flags or
// -march=native), not what the running CPU has (`cpu_runs_*` below tell that):
//   CHANNEL_SIMD_AVX2    AVX2 + FMA + F16C
//   CHANNEL_SIMD_AVX512  AVX-512 F/BW/VL (with CHANNEL_SIMD_AVX2)
//   CHANNEL_SIMD_VNNI    AVX-512 VNNI (with CHANNEL_SIMD_AVX512): the matmul loops
//   CHANNEL_SIMD_BITALG  AVX-512 BITALG (with CHANNEL_SIMD_VNNI): the Q5_0 matvec
// A kernel family is written once per ISA in files of its own (`*_avx512.cpp`,
// `*_avx2.cpp`, the scalar reference beside them), each variant compiled whenever the
// compiler can target it, and dispatched at run time to the best the CPU runs; every
// variant is checked against the reference by simd_variants_test.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
// GCC 12's AVX-512 headers start conversions from an "undefined" register and then warn
// about it (GCC bug 105593); the warning is about the header, not the kernels.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#endif

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define CHANNEL_SIMD_AVX2 1
#endif
#if defined(CHANNEL_SIMD_AVX2) && defined(__AVX512F__) && defined(__AVX512BW__) && \
    defined(__AVX512VL__)
#define CHANNEL_SIMD_AVX512 1
#endif
#if defined(CHANNEL_SIMD_AVX512) && defined(__AVX512VNNI__)
#define CHANNEL_SIMD_VNNI 1
#endif
#if defined(CHANNEL_SIMD_VNNI) && defined(__AVX512BITALG__)
#define CHANNEL_SIMD_BITALG 1
#endif

namespace channel::simd {

// Whether the running CPU executes a variant (checked once).
bool cpu_runs_avx2();
bool cpu_runs_avx512();
bool cpu_runs_avx512vnni();  // CHANNEL_SIMD_VNNI's instructions

#if defined(CHANNEL_SIMD_AVX2)

// The decode kernels' software prefetch of the weight rows they read next: into L2, not L1.
// Those kernels read 4 or 16 short rows interleaved; prefetched into L1 (T0), the next rows
// pushed out the ones being read on Zen 4's 32 KiB L1: Q8_0 decode of the Gemma-3-1B shape at
// one thread went from 10 to 21 tok/s with T1, F16 from 8.0 to 10.2 (docs/performance.md).
// The Q4_0/Q5_0 kernel (matvec16), which fetches the whole next group one block at a time,
// keeps T0: T1 measured slower there.
inline void prefetch_rows(const void* p) {
  _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T1);
}

// Horizontal sum of 8 floats: (lo128 + hi128), then pairs, then the last two.
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The f16 value at p (any alignment) widened to float: a quant block's scale.
inline float f16_at(const void* p) {
  uint16_t h;
  __builtin_memcpy(&h, p, sizeof(h));
  return _cvtsh_ss(h);
}

inline int32_t hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// The one clamp of exp_ps: ln of the smallest normal float (so 2^n is a normal float, built
// from exponent bits) and ln of the largest float. Below it e^x is taken as 1.2e-38, which
// is nothing beside a softmax maximum of 1 or beside 1 in silu's 1 + e^-x.
constexpr float kExpMin = -87.3365447504f;
constexpr float kExpMax = 88.3762626647949f;

// e^x for 8 lanes (softmax numerators, silu): Cephes-style x = n ln2 + r, a degree-6
// polynomial in r (~1 ulp), times 2^n built from exponent bits; x clamped to
// [kExpMin, kExpMax].
inline __m256 exp_ps(__m256 x) {
  x = _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(kExpMax)), _mm256_set1_ps(kExpMin));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i bits =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}

#endif  // CHANNEL_SIMD_AVX2

#if defined(CHANNEL_SIMD_AVX512)

inline float hsum(__m512 v) {
  return _mm512_reduce_add_ps(v);
}

inline __mmask16 tail_mask16(size_t n) {  // the low n < 16 lanes
  return static_cast<__mmask16>((1u << n) - 1u);
}

template <typename Int>  // int or int64_t: the caller's own type, no widening in its loop
inline __mmask16 lane_mask16(Int n) {  // the first min(n, 16) lanes (none for n <= 0)
  if (n <= 0) return 0;
  return n >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1u);
}

// e^x for 16 lanes: the 8-lane exp_ps (the same clamp and polynomial), with 2^n by scalef.
inline __m512 exp_ps(__m512 x) {
  x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(kExpMax)), _mm512_set1_ps(kExpMin));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}

#endif  // CHANNEL_SIMD_AVX512

}  // namespace channel::simd
