// matmul: y = x · Wᵀ for a GGUF weight matrix on the CPU, threaded, plus single-row
// dequantization (embedding lookup).
//
// Activation handling follows llama.cpp's CPU backend, so logits match its goldens:
//   Q8_0 / Q4_0 weights: each token's activations are quantized to Q8_0 blocks
//     (d = max|x| / 127 stored as f16, q = x * 127 / max|x| rounded ties-to-even) and the
//     dot is an integer dot per 32-element block, scaled by d_w * d_x and summed in f32;
//   F16 weights: activations are rounded to f16, then multiplied in f32;
//   BF16 weights: activations are rounded to bf16, then multiplied in f32;
//   F32 weights: plain f32.
// For Q8_0/Q4_0 weights a token's outputs are bit-identical whatever n, the row split or the
// thread count (decode and prompt paths do the same f32 operations in the same order), so
// chunked prefill and token-by-token decode agree exactly. Float weights agree to rounding.
#pragma once

#include <cstdint>
#include <span>

#include "backend/cpu/thread_pool.h"
#include "ops/weight.h"

namespace channel {

// y[n][w.rows] = x[n][w.cols] · Wᵀ; n == 1 is a matvec. Threads over rows (and tokens for
// large n). x and y must not overlap.
void matmul(const WeightMatrix& w, const float* x, int64_t n, float* y, ThreadPool& pool);

// ys[i][n][ws[i]->rows] = x · ws[i]ᵀ for up to 8 matrices that read the same x (Q/K/V, gate
// and up): one activation preparation and one parallel job over all their rows, with the
// same bits as a matmul of each. Matrices of different types or widths run one at a time.
void matmul_fused(std::span<const WeightMatrix* const> ws, const float* x, int64_t n,
                  std::span<float* const> ys, ThreadPool& pool);

// out[w.cols] = row `row` of W as f32.
void dequantize_row(const WeightMatrix& w, int64_t row, float* out);

// The straightforward definition of matmul from the scalar references in ops/quant.h
// (single-threaded, for tests and for checking the fast path).
void matmul_ref(const WeightMatrix& w, const float* x, int64_t n, float* y);

}  // namespace channel
