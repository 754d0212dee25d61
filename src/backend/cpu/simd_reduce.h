// simd_reduce.h: horizontal sums of many vectors at once, for kernels that score a block of
// keys with one vector accumulator per key (bounded_kernels_*.cpp, kv/slot_attention_*.cpp).
// Reducing 16 (8) accumulators together costs about 3 (2) instructions per key, against
// about 8 (6) for one reduction each. Include from files compiled for the ISA (simd.h).
#pragma once

#include "backend/cpu/simd.h"

namespace channel::simd {

#if defined(CHANNEL_SIMD_AVX2)

// Lane i: the sum of the 8 lanes of v[i]. Fixed order: adjacent pairs, pairs of pairs, then
// the two 128-bit halves.
inline __m256 reduce8(const __m256* v) {
  const __m256 t0 = _mm256_hadd_ps(v[0], v[1]), t1 = _mm256_hadd_ps(v[2], v[3]);
  const __m256 t2 = _mm256_hadd_ps(v[4], v[5]), t3 = _mm256_hadd_ps(v[6], v[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

#endif  // CHANNEL_SIMD_AVX2

#if defined(CHANNEL_SIMD_AVX512)

// Where the accumulator of key i of a block goes for reduce16 (an involution).
constexpr int reduce16_slot(int i) {
  return 4 * (i % 4) + i / 4;
}

// Lane i: the sum of the 16 lanes of v[reduce16_slot(i)]. Fixed order: 256-bit halves,
// then 128-bit quarters, then within each quarter.
inline __m512 reduce16(const __m512* v) {
  __m512 x[8];
  for (int i = 0; i < 8; ++i) {
    x[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0x44),
                         _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0xEE));
  }
  __m512 y[4];
  for (int j = 0; j < 4; ++j) {
    y[j] = _mm512_add_ps(_mm512_shuffle_f32x4(x[2 * j], x[2 * j + 1], 0x88),
                         _mm512_shuffle_f32x4(x[2 * j], x[2 * j + 1], 0xDD));
  }
  const __m512 z0 = _mm512_add_ps(_mm512_unpacklo_ps(y[0], y[1]), _mm512_unpackhi_ps(y[0], y[1]));
  const __m512 z1 = _mm512_add_ps(_mm512_unpacklo_ps(y[2], y[3]), _mm512_unpackhi_ps(y[2], y[3]));
  const __m512d a = _mm512_unpacklo_pd(_mm512_castps_pd(z0), _mm512_castps_pd(z1));
  const __m512d b = _mm512_unpackhi_pd(_mm512_castps_pd(z0), _mm512_castps_pd(z1));
  return _mm512_add_ps(_mm512_castpd_ps(a), _mm512_castpd_ps(b));
}

// The low min(max(n, 0), 16) lanes.
inline __mmask16 lanes16(int n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF)
                 : (n <= 0 ? static_cast<__mmask16>(0) : static_cast<__mmask16>((1u << n) - 1u));
}

#endif  // CHANNEL_SIMD_AVX512

}  // namespace channel::simd
