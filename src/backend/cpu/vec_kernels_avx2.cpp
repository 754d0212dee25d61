// AVX2 + FMA + F16C variants of the row kernels (8 floats / 32 int8 per register).
#include "backend/cpu/vec_kernels_isa.h"

#if defined(CHANNEL_SIMD_AVX2)

#include "backend/cpu/simd.h"

#include <cstring>

#include "ops/fp16.h"
#include "ops/quant.h"

namespace channel::cpu::avx2 {
namespace {

using simd::hmax;
using simd::f16_at;
using simd::hsum;


inline __m256 load_f16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

inline __m256 load_bf16(const uint16_t* p) {
  const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

// 8 int32 partial sums of w[i] * x[i] over 32 int8 pairs; x must not hold -128.
inline __m256i dot_i8(__m256i w, __m256i x) {
  const __m256i abs_w = _mm256_sign_epi8(w, w);  // |w| as u8 (-128 becomes 128)
  const __m256i signed_x = _mm256_sign_epi8(x, w);
  return _mm256_madd_epi16(_mm256_maddubs_epi16(abs_w, signed_x), _mm256_set1_epi16(1));
}

inline __m256i unpack_q4(const uint8_t* qs) {  // 16 bytes of nibbles -> 32 int8 in [-8, 7]
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(b, 4), b);
  return _mm256_sub_epi8(_mm256_and_si256(both, _mm256_set1_epi8(0x0f)), _mm256_set1_epi8(8));
}

}  // namespace

void dequantize_row_f16(const uint16_t* x, float* y, int64_t k) {
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) _mm256_storeu_ps(y + i, load_f16(x + i));
  dequantize_row_f16_ref(x + i, y + i, k - i);
}

void dequantize_row_bf16(const uint16_t* x, float* y, int64_t k) {
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) _mm256_storeu_ps(y + i, load_bf16(x + i));
  dequantize_row_bf16_ref(x + i, y + i, k - i);
}

void dequantize_row_q8_0(const void* x, float* y, int64_t k) {
  const uint8_t* p = static_cast<const uint8_t*>(x);
  for (int64_t b = 0; b < k / kQK; ++b, p += sizeof(BlockQ8_0), y += kQK) {
    const __m256 d = _mm256_set1_ps(f16_at(p));
    for (int j = 0; j < 4; ++j) {
      const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 2 + 8 * j));
      _mm256_storeu_ps(y + 8 * j, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q))));
    }
  }
}

void dequantize_row_q4_0(const void* x, float* y, int64_t k) {
  const uint8_t* p = static_cast<const uint8_t*>(x);
  for (int64_t b = 0; b < k / kQK; ++b, p += sizeof(BlockQ4_0), y += kQK) {
    const __m256 d = _mm256_set1_ps(f16_at(p));
    alignas(32) int8_t q[kQK];
    _mm256_store_si256(reinterpret_cast<__m256i*>(q), unpack_q4(p + 2));
    for (int j = 0; j < 4; ++j) {
      const __m128i v = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + 8 * j));
      _mm256_storeu_ps(y + 8 * j, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v))));
    }
  }
}

void quantize_row_q8_0(const float* x, void* y, int64_t k) {
  uint8_t* out = static_cast<uint8_t*>(y);
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < k / kQK; ++b, x += kQK, out += sizeof(BlockQ8_0)) {
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int j = 0; j < 4; ++j) {
      v[j] = _mm256_loadu_ps(x + 8 * j);
      amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign_bit, v[j]));
    }
    const float max = hmax(amax);
    const uint16_t d = fp32_to_fp16(max / 127.0f);
    const __m256 id = _mm256_set1_ps(max != 0.0f ? 127.0f / max : 0.0f);
    __m256i q[4];
    for (int j = 0; j < 4; ++j) q[j] = _mm256_cvtps_epi32(_mm256_mul_ps(v[j], id));  // ties to even
    // packs work within 128-bit lanes; the permute restores element order.
    const __m256i q16a = _mm256_packs_epi32(q[0], q[1]);
    const __m256i q16b = _mm256_packs_epi32(q[2], q[3]);
    const __m256i q8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(q16a, q16b),
                                                   _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    std::memcpy(out, &d, sizeof(d));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 2), q8);
  }
}

void round_row_f16(const float* x, float* y, int64_t k) {
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(h));
  }
  for (; i < k; ++i) y[i] = fp16_to_fp32(fp32_to_fp16(x[i]));
}

void round_row_bf16(const float* x, float* y, int64_t k) {
  // Integer round-to-nearest-even on the bit pattern, as fp32_to_bf16 (NaNs go scalar).
  int64_t i = 0;
  const __m256i lsb_mask = _mm256_set1_epi32(1);
  const __m256i bias = _mm256_set1_epi32(0x7fff);
  const __m256i hi_mask = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
  for (; i + 8 <= k; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)) != 0) break;
    const __m256i u = _mm256_castps_si256(v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), lsb_mask);
    const __m256i r = _mm256_and_si256(_mm256_add_epi32(u, _mm256_add_epi32(bias, lsb)), hi_mask);
    _mm256_storeu_ps(y + i, _mm256_castsi256_ps(r));
  }
  for (; i < k; ++i) y[i] = bf16_to_fp32(fp32_to_bf16(x[i]));
}

float dot_f32(const float* w, const float* x, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 8), _mm256_loadu_ps(x + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8)
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), acc0);
  float sum = hsum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) sum += w[i] * x[i];
  return sum;
}

float dot_f16(const uint16_t* w, const float* x, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(load_f16(w + i), _mm256_loadu_ps(x + i), acc0);
    acc1 = _mm256_fmadd_ps(load_f16(w + i + 8), _mm256_loadu_ps(x + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(load_f16(w + i), _mm256_loadu_ps(x + i), acc0);
  float sum = hsum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) sum += _cvtsh_ss(w[i]) * x[i];
  return sum;
}

float dot_bf16(const uint16_t* w, const float* x, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(load_bf16(w + i), _mm256_loadu_ps(x + i), acc0);
    acc1 = _mm256_fmadd_ps(load_bf16(w + i + 8), _mm256_loadu_ps(x + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(load_bf16(w + i), _mm256_loadu_ps(x + i), acc0);
  float sum = hsum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) sum += bf16_to_fp32(w[i]) * x[i];
  return sum;
}

#include "backend/cpu/vec_kernels_block_dots.h"

constexpr VecKernels kTable = CHANNEL_VEC_KERNEL_TABLE("avx2");

}  // namespace channel::cpu::avx2

namespace channel::cpu {
const VecKernels* vec_kernels_avx2_variant() {
  return &avx2::kTable;
}
}  // namespace channel::cpu

#else  // CHANNEL_SIMD_AVX2

namespace channel::cpu {
const VecKernels* vec_kernels_avx2_variant() {
  return nullptr;
}
}  // namespace channel::cpu

#endif  // CHANNEL_SIMD_AVX2
