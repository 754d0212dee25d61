// The AVX2 variant of the bounded group kernel (contract in bounded_kernels.h): as the
// AVX-512 one with 8 lanes: keys in blocks of 8, each rotated once into a zero-padded buffer
// shared by the group's heads, 8 scores per head reduced together, e^x by simd::exp_ps; the
// kernel itself is bounded_kernels_driver.h over the primitives below.
#include <algorithm>
#include <limits>
#include <vector>

#include "backend/cpu/bounded_kernels.h"
#include "backend/cpu/simd.h"
#include "backend/cpu/simd_reduce.h"

namespace channel::cpu {

#if defined(CHANNEL_SIMD_AVX2)

namespace {

constexpr int kW = 8;  // lanes, and keys per block
using Vec = __m256;
using Mask = __m256i;  // all-ones lanes

Mask lanes(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
Vec zero() {
  return _mm256_setzero_ps();
}
Vec splat(float x) {
  return _mm256_set1_ps(x);
}
Vec load(const float* p) {
  return _mm256_loadu_ps(p);
}
Vec load(const float* p, Mask m) {
  return _mm256_maskload_ps(p, m);
}
Vec load_or(Vec fill, Mask m, const float* p) {
  return _mm256_blendv_ps(fill, _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
}
void store(float* p, Mask m, Vec v) {
  _mm256_maskstore_ps(p, m, v);
}
Vec keep(Vec v, Mask m) {
  return _mm256_and_ps(v, _mm256_castsi256_ps(m));
}
Vec add(Vec a, Vec b) {
  return _mm256_add_ps(a, b);
}
Vec sub(Vec a, Vec b) {
  return _mm256_sub_ps(a, b);
}
Vec mul(Vec a, Vec b) {
  return _mm256_mul_ps(a, b);
}
Vec max(Vec a, Vec b) {
  return _mm256_max_ps(a, b);
}
Vec fmadd(Vec a, Vec b, Vec c) {
  return _mm256_fmadd_ps(a, b, c);
}
Vec fmsub(Vec a, Vec b, Vec c) {
  return _mm256_fmsub_ps(a, b, c);
}
float reduce_add(Vec v) {
  return simd::hsum(v);
}
float reduce_max(Vec v) {
  return simd::hmax(v);
}
Vec exp(Vec x) {
  return simd::exp_ps(x);
}
int acc_slot(int i) {
  return i;
}
Vec reduce_keys(const Vec* acc) {
  return simd::reduce8(acc);
}

#include "backend/cpu/bounded_kernels_driver.h"

}  // namespace

const BoundedKernelVariant* bounded_kernel_avx2_variant() {
  static const BoundedKernelVariant v{"avx2", attend};
  return &v;
}

#else  // CHANNEL_SIMD_AVX2

const BoundedKernelVariant* bounded_kernel_avx2_variant() {
  return nullptr;  // this compiler cannot target avx2
}

#endif  // CHANNEL_SIMD_AVX2

}  // namespace channel::cpu
