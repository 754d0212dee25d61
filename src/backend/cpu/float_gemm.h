// float_gemm.h: the prompt GEMM of F32/F16/BF16 weights on AVX-512 (float_gemm_avx512.cpp),
// cache-blocked, with every output the decode loop's arithmetic (see matmul_kernels.h).
#pragma once

#include <cstdint>

#include "backend/cpu/matmul_kernels.h"

namespace channel::cpu {
#if defined(CHANNEL_SIMD_VNNI)
namespace avx512 {
// y[t * y_stride + r] = row r of w · token t (x.xf, rounded to the weight's precision), for
// r in [r0, r1) and every token.
void float_gemm_rows(const MatmulWeights& w, const MatmulInput& x, int64_t r0, int64_t r1, float* y,
                     int64_t y_stride);
}  // namespace avx512
#endif
}  // namespace channel::cpu
