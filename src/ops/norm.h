// RMS normalisation of one row: y = (x / sqrt(mean(x^2) + eps)) * w, as llama.cpp computes it
// (sum of squares in double, scale in float). y may alias x. The SIMD variants and the
// dispatching rms_norm live in backend/cpu/layer_kernels.h.
#pragma once

#include <cstdint>

namespace channel {

// Obvious scalar version, the reference for tests and the scalar variant.
void rms_norm_ref(const float* x, const float* w, int64_t n, float eps, float* y);

}  // namespace channel
