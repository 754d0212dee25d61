// Dispatch of rehydrate_kernels.h: every kernel runs the best variant the CPU executes
// (rehydrate_kernels_avx512.cpp, rehydrate_kernels_avx2.cpp, or the scalar references in
// rehydrate_kernels_ref.cpp); all of them are bit-identical to the references.
#include "memory/rehydrate_kernels.h"

#include <vector>

#include "backend/cpu/simd_variants.h"

namespace channel {

const RehydrateKernels* rehydrate_kernels_avx512();
const RehydrateKernels* rehydrate_kernels_avx2();

std::span<const RehydrateKernels> rehydrate_kernel_variants() {
  static const RehydrateKernels kScalar{"scalar",
                                        f16_rows_to_f32_ref,
                                        f32_rows_to_f32_ref,
                                        f16_rows_to_f16_ref,
                                        compose_rotations_ref,
                                        chain_rotations_ref,
                                        expand_rotation_ref};
  static const std::vector<RehydrateKernels> all = simd::runnable_best_first(
      rehydrate_kernels_avx512(), simd::cpu_runs_avx512(), rehydrate_kernels_avx2(), kScalar);
  return all;
}

namespace {

const RehydrateKernels& best() {
  static const RehydrateKernels& b = rehydrate_kernel_variants().front();
  return b;
}

}  // namespace

const char* rehydrate_kernels_isa() {
  return best().isa;
}

void f16_rows_to_f32(const HeadRotation* rot, const uint16_t* src, size_t n, const RowLayout& out,
                     float* dst) {
  best().f16_rows_to_f32(rot, src, n, out, dst);
}
void f32_rows_to_f32(const HeadRotation* rot, const float* src, size_t n, const RowLayout& out,
                     float* dst) {
  best().f32_rows_to_f32(rot, src, n, out, dst);
}
void f16_rows_to_f16(const HeadRotation* rot, const uint16_t* src, size_t n, uint32_t n_heads,
                     uint32_t head_dim, uint16_t* dst) {
  best().f16_rows_to_f16(rot, src, n, n_heads, head_dim, dst);
}
void compose_rotations(double* c, double* s, const double* C, const double* S, size_t n) {
  best().compose_rotations(c, s, C, S, n);
}
void chain_rotations(const double* const* C, const double* const* S, int n_factors, size_t n,
                     double* c, double* s) {
  best().chain_rotations(C, S, n_factors, n, c, s);
}
void expand_rotation(bool neox, uint32_t n_rot, const double* cos, const double* sin, float* c,
                     float* s) {
  best().expand_rotation(neox, n_rot, cos, sin, c, s);
}

}  // namespace channel
