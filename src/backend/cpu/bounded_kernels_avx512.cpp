// The AVX-512 variant of the bounded group kernel (contract in bounded_kernels.h): keys in
// blocks of 16, each rotated once into a zero-padded buffer shared by the group's heads,
// 16 scores per head reduced together, e^x by simd::exp_ps, outputs in registers; the
// kernel itself is bounded_kernels_driver.h over the primitives below.
#include <algorithm>
#include <limits>
#include <vector>

#include "backend/cpu/bounded_kernels.h"
#include "backend/cpu/simd.h"
#include "backend/cpu/simd_reduce.h"

namespace channel::cpu {

#if defined(CHANNEL_SIMD_AVX512)

namespace {

constexpr int kW = 16;  // lanes, and keys per block
using Vec = __m512;
using Mask = __mmask16;

Mask lanes(int n) {
  return simd::lanes16(n);
}
Vec zero() {
  return _mm512_setzero_ps();
}
Vec splat(float x) {
  return _mm512_set1_ps(x);
}
Vec load(const float* p) {
  return _mm512_loadu_ps(p);
}
Vec load(const float* p, Mask m) {
  return _mm512_maskz_loadu_ps(m, p);
}
Vec load_or(Vec fill, Mask m, const float* p) {
  return _mm512_mask_loadu_ps(fill, m, p);
}
void store(float* p, Mask m, Vec v) {
  _mm512_mask_storeu_ps(p, m, v);
}
Vec keep(Vec v, Mask m) {
  return _mm512_maskz_mov_ps(m, v);
}
Vec add(Vec a, Vec b) {
  return _mm512_add_ps(a, b);
}
Vec sub(Vec a, Vec b) {
  return _mm512_sub_ps(a, b);
}
Vec mul(Vec a, Vec b) {
  return _mm512_mul_ps(a, b);
}
Vec max(Vec a, Vec b) {
  return _mm512_max_ps(a, b);
}
Vec fmadd(Vec a, Vec b, Vec c) {
  return _mm512_fmadd_ps(a, b, c);
}
Vec fmsub(Vec a, Vec b, Vec c) {
  return _mm512_fmsub_ps(a, b, c);
}
float reduce_add(Vec v) {
  return _mm512_reduce_add_ps(v);
}
float reduce_max(Vec v) {
  return _mm512_reduce_max_ps(v);
}
Vec exp(Vec x) {
  return simd::exp_ps(x);
}
int acc_slot(int i) {
  return simd::reduce16_slot(i);
}
Vec reduce_keys(const Vec* acc) {
  return simd::reduce16(acc);
}

#include "backend/cpu/bounded_kernels_driver.h"

}  // namespace

const BoundedKernelVariant* bounded_kernel_avx512_variant() {
  static const BoundedKernelVariant v{"avx512", attend};
  return &v;
}

#else  // CHANNEL_SIMD_AVX512

const BoundedKernelVariant* bounded_kernel_avx512_variant() {
  return nullptr;  // this compiler cannot target avx512
}

#endif  // CHANNEL_SIMD_AVX512

}  // namespace channel::cpu
