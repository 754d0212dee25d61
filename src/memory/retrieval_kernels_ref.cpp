// Scalar references of retrieval_kernels.h: short, obvious, never optimised.
#include <algorithm>
#include <limits>

#include "memory/retrieval_kernels.h"
#include "ops/fp16.h"

namespace channel {

namespace {
float dot_f16(const float* q, const uint16_t* k, size_t dim) {
  float s = 0.0f;
  for (size_t i = 0; i < dim; ++i) s += q[i] * fp16_to_fp32(k[i]);
  return s;
}
}  // namespace

float key_match_score_ref(const float* q, const uint16_t* keys, size_t n_blocks, size_t group,
                          size_t R, size_t dim) {
  float total = 0.0f;
  for (size_t b = 0; b < n_blocks; ++b)
    for (size_t g = 0; g < group; ++g) {
      float best = -std::numeric_limits<float>::infinity();
      for (size_t r = 0; r < R; ++r)
        best = std::max(best, dot_f16(q + (b * group + g) * dim, keys + (b * R + r) * dim, dim));
      total += best;
    }
  return total;
}

float proj_max_score_ref(const float* c, const uint16_t* rows, size_t n, size_t dim) {
  float best = -std::numeric_limits<float>::infinity();
  for (size_t t = 0; t < n; ++t) best = std::max(best, dot_f16(c, rows + t * dim, dim));
  return best;
}

}  // namespace channel
