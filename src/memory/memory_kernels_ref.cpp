// Scalar references of memory_kernels.h: short, obvious, never optimised.
#include <cstring>

#include "memory/memory_kernels.h"
#include "ops/fp16.h"

namespace channel {

void centroid_dots_ref(const uint8_t* base, size_t stride_bytes, size_t n, const float* q,
                       size_t dim, float* dots, float* norms2) {
  for (size_t r = 0; r < n; ++r) {
    const uint8_t* row = base + r * stride_bytes;
    float dot = 0.0f;
    float nn = 0.0f;
    for (size_t i = 0; i < dim; ++i) {
      uint16_t h;
      std::memcpy(&h, row + 2 * i, 2);
      const float c = fp16_to_fp32(h);
      dot += c * q[i];
      nn += c * c;
    }
    dots[r] = dot;
    norms2[r] = nn;
  }
}

void int8_dots_ref(const int8_t* rows, size_t stride, size_t n, const int8_t* q, size_t dim,
                   int32_t* dots) {
  for (size_t r = 0; r < n; ++r) {
    const int8_t* row = rows + r * stride;
    int32_t sum = 0;
    for (size_t i = 0; i < dim; ++i) sum += static_cast<int32_t>(row[i]) * q[i];
    dots[r] = sum;
  }
}

void f32_to_f16_row_ref(const float* x, uint16_t* y, size_t k) {
  for (size_t i = 0; i < k; ++i) y[i] = fp32_to_fp16(x[i]);
}

}  // namespace channel
