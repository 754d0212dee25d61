// The scalar variant of slot_attention: the portable fallback, primitives in plain loops.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backend/cpu/simd.h"
#include "kv/slot_attention.h"
#include "ops/fp16.h"

namespace channel {

namespace kv_scalar {
namespace {

float value(float x) {
  return x;
}
float value(uint16_t x) {
  return fp16_to_fp32(x);
}

template <typename T>
float dot(const float* a, const T* b, uint32_t n) {
  float s = 0.0f;
  for (uint32_t i = 0; i < n; ++i) s += a[i] * value(b[i]);
  return s;
}

template <typename T>
void axpy(float* y, const T* x, float w, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) y[i] += w * value(x[i]);
}

float softmax_numerators(float* s, size_t n) {
  float mx = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < n; ++i) mx = std::max(mx, s[i]);
  float sum = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    s[i] = std::exp(s[i] - mx);
    sum += s[i];
  }
  return sum;
}

#include "kv/slot_attention_kernel.h"

}  // namespace
}  // namespace kv_scalar

const SlotAttentionVariant* slot_attention_scalar_variant() {
  static const SlotAttentionVariant v{"scalar", kv_scalar::slot_attention_kernel};
  return &v;
}

}  // namespace channel
