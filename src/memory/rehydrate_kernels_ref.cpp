// Scalar references of rehydrate_kernels.h: short, obvious, one value at a time.
#include <cmath>
#include <vector>

#include "memory/rehydrate_kernels.h"
#include "ops/fp16.h"

namespace channel {

void expand_rotation_ref(bool neox, uint32_t n_rot, const double* cos, const double* sin, float* c,
                         float* s) {
  const uint32_t half = n_rot / 2;
  for (uint32_t i = 0; i < half; ++i) {
    const uint32_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;  // pair (a, b)
    c[a] = c[b] = static_cast<float>(cos[i]);
    s[a] = static_cast<float>(-sin[i]);
    s[b] = static_cast<float>(sin[i]);
  }
}

namespace {

float value_of(const uint16_t* x, uint32_t d) {
  return fp16_to_fp32(x[d]);
}
float value_of(const float* x, uint32_t d) {
  return x[d];
}

// One head x into y.
template <typename T>
void rotate_head_ref(const HeadRotation* rot, const T* x, uint32_t head_dim, float* y) {
  const uint32_t n_rot = rot ? rot->n_rot : 0, half = n_rot / 2;
  for (uint32_t d = 0; d < n_rot; ++d) {
    const uint32_t p = rot->neox ? (d < half ? d + half : d - half) : (d ^ 1u);
    y[d] = std::fma(value_of(x, d), rot->c[d], value_of(x, p) * rot->s[d]);
  }
  for (uint32_t d = n_rot; d < head_dim; ++d) y[d] = value_of(x, d);
}

template <typename T>
void rows_ref(const HeadRotation* rot, const T* src, size_t n, const RowLayout& out, float* dst) {
  for (size_t t = 0; t < n; ++t)
    for (uint32_t h = 0; h < out.n_heads; ++h)
      rotate_head_ref(rot, src + (t * out.n_heads + h) * out.head_dim, out.head_dim,
                      dst + t * out.token_stride + h * out.head_stride);
}

}  // namespace

void f16_rows_to_f32_ref(const HeadRotation* rot, const uint16_t* src, size_t n,
                         const RowLayout& out, float* dst) {
  rows_ref(rot, src, n, out, dst);
}

void f16_rows_to_f16_ref(const HeadRotation* rot, const uint16_t* src, size_t n, uint32_t n_heads,
                         uint32_t head_dim, uint16_t* dst) {
  std::vector<float> y(head_dim);  // the whole head first: dst may be src
  for (size_t i = 0; i < n * n_heads; ++i) {
    rotate_head_ref(rot, src + i * head_dim, head_dim, y.data());
    for (uint32_t d = 0; d < head_dim; ++d) dst[i * head_dim + d] = fp32_to_fp16(y[d]);
  }
}

void f32_rows_to_f32_ref(const HeadRotation* rot, const float* src, size_t n, const RowLayout& out,
                         float* dst) {
  rows_ref(rot, src, n, out, dst);
}

void compose_rotations_ref(double* c, double* s, const double* C, const double* S, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const double c0 = c[i], s0 = s[i];
    c[i] = std::fma(c0, C[i], -(s0 * S[i]));
    s[i] = std::fma(s0, C[i], c0 * S[i]);
  }
}

}  // namespace channel

namespace channel {

void chain_rotations_ref(const double* const* C, const double* const* S, int n_factors, size_t n,
                         double* c, double* s) {
  for (size_t i = 0; i < n; ++i) {
    c[i] = C[0][i];
    s[i] = S[0][i];
  }
  for (int j = 1; j < n_factors; ++j) compose_rotations_ref(c, s, C[j], S[j], n);
}

}  // namespace channel
