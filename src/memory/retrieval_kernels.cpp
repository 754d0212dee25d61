// Dispatch of retrieval_kernels.h: both scans run the best variant the CPU executes
// (retrieval_kernels_avx512.cpp, retrieval_kernels_avx2.cpp, or the scalar references).
#include "memory/retrieval_kernels.h"

#include <vector>

#include "backend/cpu/simd_variants.h"

namespace channel {

const RetrievalKernels* retrieval_kernels_avx512();
const RetrievalKernels* retrieval_kernels_avx2();

std::span<const RetrievalKernels> retrieval_kernel_variants() {
  static const RetrievalKernels kScalar{"scalar", key_match_score_ref, proj_max_score_ref};
  static const std::vector<RetrievalKernels> all = simd::runnable_best_first(
      retrieval_kernels_avx512(), simd::cpu_runs_avx512(), retrieval_kernels_avx2(), kScalar);
  return all;
}

namespace {

const RetrievalKernels& best() {
  static const RetrievalKernels& b = retrieval_kernel_variants().front();
  return b;
}

}  // namespace

const char* retrieval_kernels_isa() {
  return best().isa;
}

float key_match_score(const float* q, const uint16_t* keys, size_t n_blocks, size_t group, size_t R,
                      size_t dim) {
  return best().key_match_score(q, keys, n_blocks, group, R, dim);
}

float proj_max_score(const float* c, const uint16_t* rows, size_t n, size_t dim) {
  return best().proj_max_score(c, rows, n, dim);
}

}  // namespace channel
