// layer_kernels.h: the row kernels of a transformer layer besides the matmuls: RMS norm, the
// gated FFN activations and attention of one query head over a list of KV slots. Each has a
// scalar reference in ops/ (ops/norm.h, ops/activation.h, ops/attention.h: the contracts)
// and is written here once per ISA (layer_kernels_{avx512,avx2,scalar}.cpp, backend/cpu/
// simd.h); the functions below run the best variant the CPU executes.
#pragma once

#include <cstdint>
#include <span>

#include "ops/attention.h"

namespace channel {

// rms_norm_ref's contract (y may alias x); the sum of squares is kept in double, so only the
// order of its additions differs from the reference.
void rms_norm(const float* x, const float* w, int64_t n, float eps, float* y);
// silu_glu_ref's and gelu_tanh_glu_ref's contracts (out may alias gate); gelu_tanh_glu
// equals its reference bit for bit (the same table lookups).
void silu_glu(const float* gate, const float* up, int64_t n, float* out);
void gelu_tanh_glu(const float* gate, const float* up, int64_t n, float* out);
// attend_ref's contract. Every variant computes each score and output element in an order of
// its own that is the same whatever the slot list, so a token's attention does not depend on
// the batch it is decoded in.
void attend(const float* q, const AttentionHead& kv, std::span<const int32_t> slots, float scale,
            float* scores, float* out);

// One variant of the family, for simd_variants_test.
struct LayerKernels {
  const char* isa;  // "avx512", "avx2", "scalar"
  void (*rms_norm)(const float* x, const float* w, int64_t n, float eps, float* y);
  void (*silu_glu)(const float* gate, const float* up, int64_t n, float* out);
  void (*gelu_tanh_glu)(const float* gate, const float* up, int64_t n, float* out);
  void (*attend)(const float* q, const AttentionHead& kv, std::span<const int32_t> slots,
                 float scale, float* scores, float* out);
};

// The variants this build has and this CPU runs, best first (the last is the scalar one).
std::span<const LayerKernels> layer_kernel_variants();
// The variant the functions above run.
const char* layer_kernels_isa();

}  // namespace channel
