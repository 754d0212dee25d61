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
#if defined(CHANNEL_SIMD_BITALG)
// The same for Q5_0 (xcorr: -16 * sum q).
void matvec_q5_0(const MatmulWeights& w, const uint8_t* xq, const int32_t* xcorr, int64_t r0,
                 int64_t r1, float* y);
#endif
}  // namespace avx512
#endif
}  // namespace channel::cpu
