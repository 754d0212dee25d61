// RMS normalisation of one row: y = (x / sqrt(mean(x^2) + eps)) * w, as llama.cpp computes it
// (sum of squares in double, scale in float). y may alias x.
#pragma once

#include <cstdint>

namespace channel {

// Obvious scalar version, the reference for tests.
void rms_norm_ref(const float* x, const float* w, int64_t n, float eps, float* y);

// SIMD version (AVX-512 / AVX2 where built, scalar otherwise).
void rms_norm(const float* x, const float* w, int64_t n, float eps, float* y);

}  // namespace channel
