// kquant_gemm.h: the prompt GEMM of the K-quants (Q2_K..Q6_K) on AVX-512
// (kquant_gemm_avx512.cpp): 32-row panels repacked once into a lanes-are-rows layout, then a
// register tile of 32 rows x 4 tokens of int8 vpdpbusd with the per-group scales applied in
// i32. Each output is the arithmetic of the decode dot (quant_kernels_simd.h, dot_k_multi):
// per super-block the exact integer sums, then one f32 FMA with d * d_x (and one with
// dmin * d_x for the types with minimums), in super-block order.
#pragma once

#include <cstdint>

#include "backend/cpu/matmul_kernels.h"

namespace channel::cpu {
#if defined(CHANNEL_SIMD_VNNI)
namespace avx512 {
// Whether `type` is one of the K-quants this GEMM takes.
bool is_kquant(GgmlType type);
// y[t * y_stride + r] = row r of w · token t, for r in [r0, r1) and every token; x.xq holds
// each token's Q8_K blocks, x.xq_row_bytes apart.
void kquant_gemm_rows(const MatmulWeights& w, const MatmulInput& x, int64_t r0, int64_t r1,
                      float* y, int64_t y_stride);
}  // namespace avx512
#endif
}  // namespace channel::cpu
