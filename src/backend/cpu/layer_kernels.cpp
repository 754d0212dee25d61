// layer_kernels.h: runs the best variant the CPU executes (AVX-512, AVX2 or scalar; each in
// its own file, compiled whenever the compiler can target it).
#include "backend/cpu/layer_kernels.h"

#include <vector>

#include "backend/cpu/simd_variants.h"

namespace channel {

const LayerKernels* layer_kernels_avx512_variant();
const LayerKernels* layer_kernels_avx2_variant();
const LayerKernels* layer_kernels_scalar_variant();

std::span<const LayerKernels> layer_kernel_variants() {
  static const std::vector<LayerKernels> all =
      simd::runnable_best_first(layer_kernels_avx512_variant(), simd::cpu_runs_avx512(),
                                layer_kernels_avx2_variant(), *layer_kernels_scalar_variant());
  return all;
}

namespace {

const LayerKernels& best() {
  static const LayerKernels& b = layer_kernel_variants().front();
  return b;
}

}  // namespace

const char* layer_kernels_isa() {
  return best().isa;
}

void rms_norm(const float* x, const float* w, int64_t n, float eps, float* y) {
  best().rms_norm(x, w, n, eps, y);
}

void silu_glu(const float* gate, const float* up, int64_t n, float* out) {
  best().silu_glu(gate, up, n, out);
}

void gelu_tanh_glu(const float* gate, const float* up, int64_t n, float* out) {
  best().gelu_tanh_glu(gate, up, n, out);
}

void attend(const float* q, const AttentionHead& kv, std::span<const int32_t> slots, float scale,
            float* scores, float* out) {
  best().attend(q, kv, slots, scale, scores, out);
}

}  // namespace channel
