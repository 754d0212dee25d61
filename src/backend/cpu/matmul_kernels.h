// matmul_kernels.h: the CPU inner loops of ops/matmul: a range of weight rows times a batch
// of prepared activations, written once per ISA (matmul_kernels_{avx512,avx2,scalar}.cpp,
// backend/cpu/simd.h) and dispatched at run time. The AVX-512 (VNNI) variant has streaming
// matvecs (decode: 4 rows at a time, 16 in the lanes for Q4_0/Q5_0, quant_matvec.h) and
// register-tiled GEMMs (prompt): int8 vpdpbusd on repacked 32-row panels for Q8_0/Q4_0/Q5_0
// and the K-quants (kquant_gemm.h) and cache-blocked f32 FMA for F16/BF16/F32
// (float_gemm.h). The AVX2 and scalar variants loop over their own row dots of
// vec_kernels.h and quant_kernels.h (matmul_dot_rows.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "backend/cpu/simd.h"
#include "gguf/ggml_type.h"

namespace channel::cpu {

struct MatmulWeights {
  GgmlType type;
  const uint8_t* data;  // [rows][row_bytes]
  size_t row_bytes;
  int64_t rows;
  int64_t cols;
  const uint8_t* groups = nullptr;  // WeightMatrix::groups
};

// Activations prepared once per matmul (see backend/cpu/matmul.h for the rounding rules).
struct MatmulInput {
  int64_t n = 0;  // tokens
  // F32/F16/BF16 weights: activations rounded to the weight's precision.
  const float* xf = nullptr;  // [n][cols]
  // Q8_0/Q4_0 weights: activations as Q8_0 blocks, their scales as f32, and each block's
  // sum of q times minus the weight's zero point (128 for Q8_0, 8 for Q4_0, 16 for Q5_0),
  // which the int8 loops add back after multiplying unsigned weights (w + zero point) by
  // signed q.
  // Other block types (backend/cpu/quant_kernels.h): xq holds each token's activation blocks
  // in the format the type's dot takes, xq_row_bytes apart; xd and xcorr are unused.
  const uint8_t* xq = nullptr;     // [n][cols / 32] BlockQ8_0
  size_t xq_row_bytes = 0;         // bytes of one token's blocks
  const float* xd = nullptr;       // [n][cols / 32]
  const int32_t* xcorr = nullptr;  // [n][cols / 32]
};

// Rows per unit of work when splitting a matmul of n tokens among threads, in the best
// variant the CPU executes.
int64_t matmul_row_granule(GgmlType type, int64_t n);

// y[t * y_stride + r] = row r of w · token t, for r in [r0, r1) and every token, in the best
// variant the CPU executes.
void matmul_rows(const MatmulWeights& w, const MatmulInput& x, int64_t r0, int64_t r1, float* y,
                 int64_t y_stride);

// One variant of the family, for simd_variants_test: the loops of one instruction set over
// activations prepared as matmul.cpp does (the same bits in every variant).
struct MatmulKernels {
  const char* isa;  // "avx512" (with VNNI), "avx2", "scalar"
  int64_t (*row_granule)(GgmlType type, int64_t n);
  void (*rows)(const MatmulWeights& w, const MatmulInput& x, int64_t r0, int64_t r1, float* y,
               int64_t y_stride);
  // Whether rows() reads MatmulWeights::groups of this type (quant_groups.h); null: never.
  bool (*reads_groups)(GgmlType type) = nullptr;
};

// The variants this build has and this CPU runs, best first (the last is the scalar one).
std::span<const MatmulKernels> matmul_kernel_variants();
const char* matmul_kernels_isa();
// Whether the best variant reads regrouped weights of this type (quant_groups.h).
bool matmul_reads_groups(GgmlType type);

const MatmulKernels* matmul_kernels_avx512_variant();
const MatmulKernels* matmul_kernels_avx2_variant();
const MatmulKernels* matmul_kernels_scalar_variant();

}  // namespace channel::cpu
