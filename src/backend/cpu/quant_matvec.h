// quant_matvec.h: decode matvecs (one token) on AVX-512 that take 16 weight rows at a time
// with the rows in the vector lanes (quant_matvec_avx512.cpp: Q8_0, Q4_0, Q5_0), so that
// no horizontal sum is needed per block and row. Same arithmetic per output as the prompt
// GEMM of matmul_kernels_avx512.cpp.
#pragma once

#include <cstdint>

#include "backend/cpu/matmul_kernels.h"

namespace channel::cpu {
#if defined(CHANNEL_SIMD_VNNI)
namespace avx512 {
// y[r] = row r of Q8_0 weights w · one token, for r in [r0, r1): xq the token's Q8_0 blocks,
// xcorr its per-block corrections -128 * sum q (MatmulInput).
void matvec_q8_0(const MatmulWeights& w, const uint8_t* xq, const int32_t* xcorr, int64_t r0,
                 int64_t r1, float* y);
// y[r] = row r of Q4_0 weights w · one token, for r in [r0, r1): xq the token's Q8_0 blocks,
// xcorr its per-block corrections -8 * sum q (MatmulInput).
void matvec_q4_0(const MatmulWeights& w, const uint8_t* xq, const int32_t* xcorr, int64_t r0,
                 int64_t r1, float* y);
// Q5_0 with 16 rows in the lanes, their 32-bit fifth-bit words in a vector (two rows a 64-bit
// lane): pick[half][g] tells vpshufbitqmb which bit each byte of dword group g takes, half 0
// for elements 4g + i (the low nibbles), half 1 for 16 + 4g + i (the high ones).
inline void fifth_bit_picks(__m512i pick[2][4]) {
  for (int g = 0; g < 4; ++g) {
    for (int half = 0; half < 2; ++half) {
      alignas(64) uint8_t c[64];
      for (int j = 0; j < 64; ++j)
        c[j] = static_cast<uint8_t>((j % 8) / 4 * 32 + 16 * half + 4 * g + j % 4);
      pick[half][g] = _mm512_load_si512(c);
    }
  }
}

// The unsigned quants of 16 rows (lane r: row r) from v, dword g of their 16 nibble bytes:
// lo for elements 4g..4g+3 (the low nibbles), hi for 16+4g..16+4g+3 (the high ones); Q5_0
// (kFive) with each element's fifth bit from qh (the rows' fifth-bit words) as bit 4.
template <bool kFive>
[[gnu::always_inline]] inline void lane_quants(__m512i v, __m512i qh, const __m512i pick[2][4],
                                               int g, __m512i& lo, __m512i& hi) {
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  lo = _mm512_and_si512(v, low4);
  hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
  if constexpr (kFive) {
    const __m512i bit4 = _mm512_set1_epi8(0x10);
    lo = _mm512_or_si512(lo,
                         _mm512_maskz_mov_epi8(_mm512_bitshuffle_epi64_mask(qh, pick[0][g]), bit4));
    hi = _mm512_or_si512(hi,
                         _mm512_maskz_mov_epi8(_mm512_bitshuffle_epi64_mask(qh, pick[1][g]), bit4));
  }
}

#if defined(CHANNEL_SIMD_BITALG)
// y[r] = row r of Q5_0 weights w · one token, as matvec_q4_0 (xcorr: -16 * sum q).
void matvec_q5_0(const MatmulWeights& w, const uint8_t* xq, const int32_t* xcorr, int64_t r0,
                 int64_t r1, float* y);
#endif
}  // namespace avx512
#endif
}  // namespace channel::cpu
