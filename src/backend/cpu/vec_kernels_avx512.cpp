// AVX-512 (F/BW/VL/VNNI) variants of the row kernels: 16 floats per register, masked tails,
// and vpdpbusd for the int8 dots.
#include "backend/cpu/vec_kernels_isa.h"

#if defined(CHANNEL_SIMD_VNNI)

#include "backend/cpu/simd.h"

#include <cstring>

#include "ops/fp16.h"
#include "ops/quant.h"

namespace channel::cpu::avx512 {
namespace {

using simd::f16_at;
using simd::hsum;

inline __mmask16 tail_mask(int64_t r) {  // r < 16
  return simd::tail_mask16(static_cast<size_t>(r));
}


inline __m512 load_f16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m512 load_f16(const uint16_t* p, __mmask16 m) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}

inline __m512 bf16_bits_to_ps(__m256i h) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
inline __m512 load_bf16(const uint16_t* p) {
  return bf16_bits_to_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m512 load_bf16(const uint16_t* p, __mmask16 m) {
  return bf16_bits_to_ps(_mm256_maskz_loadu_epi16(m, p));
}

// 8 int32 partial sums of w[i] * x[i] over 32 int8 pairs; x must not hold -128.
inline __m256i dot_i8(__m256i w, __m256i x) {
  const __m256i abs_w = _mm256_abs_epi8(w);  // -128 becomes 0x80 = 128 as u8
  const __m256i signed_x = _mm256_sign_epi8(x, w);
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), abs_w, signed_x);
}

inline __m256i unpack_q4(const uint8_t* qs) {  // 16 bytes of nibbles -> 32 int8 in [-8, 7]
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(b, 4), b);
  return _mm256_sub_epi8(_mm256_and_si256(both, _mm256_set1_epi8(0x0f)), _mm256_set1_epi8(8));
}

// Sum of w[i] * x[i] for a float dot whose weights load with `load` (full and masked).
template <typename W, typename Load, typename LoadMasked>
inline float dot_float(const W* w, const float* x, int64_t n, Load load, LoadMasked load_masked) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  __m512 acc2 = _mm512_setzero_ps(), acc3 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    acc0 = _mm512_fmadd_ps(load(w + i), _mm512_loadu_ps(x + i), acc0);
    acc1 = _mm512_fmadd_ps(load(w + i + 16), _mm512_loadu_ps(x + i + 16), acc1);
    acc2 = _mm512_fmadd_ps(load(w + i + 32), _mm512_loadu_ps(x + i + 32), acc2);
    acc3 = _mm512_fmadd_ps(load(w + i + 48), _mm512_loadu_ps(x + i + 48), acc3);
  }
  for (; i + 16 <= n; i += 16) acc0 = _mm512_fmadd_ps(load(w + i), _mm512_loadu_ps(x + i), acc0);
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    acc1 = _mm512_fmadd_ps(load_masked(w + i, m), _mm512_maskz_loadu_ps(m, x + i), acc1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
}

}  // namespace

void dequantize_row_f16(const uint16_t* x, float* y, int64_t k) {
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) _mm512_storeu_ps(y + i, load_f16(x + i));
  if (i < k) _mm512_mask_storeu_ps(y + i, tail_mask(k - i), load_f16(x + i, tail_mask(k - i)));
}

void dequantize_row_bf16(const uint16_t* x, float* y, int64_t k) {
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) _mm512_storeu_ps(y + i, load_bf16(x + i));
  if (i < k) _mm512_mask_storeu_ps(y + i, tail_mask(k - i), load_bf16(x + i, tail_mask(k - i)));
}

void dequantize_row_q8_0(const void* x, float* y, int64_t k) {
  const uint8_t* p = static_cast<const uint8_t*>(x);
  for (int64_t b = 0; b < k / kQK; ++b, p += sizeof(BlockQ8_0), y += kQK) {
    const __m512 d = _mm512_set1_ps(f16_at(p));
    for (int j = 0; j < 2; ++j) {
      const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 + 16 * j));
      _mm512_storeu_ps(y + 16 * j, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q))));
    }
  }
}

void dequantize_row_q4_0(const void* x, float* y, int64_t k) {
  const uint8_t* p = static_cast<const uint8_t*>(x);
  for (int64_t b = 0; b < k / kQK; ++b, p += sizeof(BlockQ4_0), y += kQK) {
    const __m512 d = _mm512_set1_ps(f16_at(p));
    const __m256i q = unpack_q4(p + 2);
    const __m128i halves[2] = {_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1)};
    for (int j = 0; j < 2; ++j) {
      _mm512_storeu_ps(y + 16 * j,
                       _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(halves[j]))));
    }
  }
}

void quantize_row_q8_0(const float* x, void* y, int64_t k) {
  uint8_t* out = static_cast<uint8_t*>(y);
  for (int64_t b = 0; b < k / kQK; ++b, x += kQK, out += sizeof(BlockQ8_0)) {
    const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
    const float max = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    const uint16_t d = fp32_to_fp16(max / 127.0f);
    const __m512 id = _mm512_set1_ps(max != 0.0f ? 127.0f / max : 0.0f);
    // cvtps_epi32 rounds ties to even (the default MXCSR mode); |q| <= 127, no saturation.
    const __m128i q0 = _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v0, id)));
    const __m128i q1 = _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v1, id)));
    std::memcpy(out, &d, sizeof(d));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2), q0);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 18), q1);
  }
}

void round_row_f16(const float* x, float* y, int64_t k) {
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) {
    const __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm512_storeu_ps(y + i, _mm512_cvtph_ps(h));
  }
  for (; i < k; ++i) y[i] = fp16_to_fp32(fp32_to_fp16(x[i]));
}

void round_row_bf16(const float* x, float* y, int64_t k) {
  // Integer round-to-nearest-even on the bit pattern, as fp32_to_bf16 (NaNs go scalar).
  int64_t i = 0;
  const __m512i bias = _mm512_set1_epi32(0x7fff);
  const __m512i one = _mm512_set1_epi32(1);
  const __m512i hi_mask = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  for (; i + 16 <= k; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    if (_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) != 0) break;
    const __m512i u = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
    const __m512i r = _mm512_and_si512(_mm512_add_epi32(u, _mm512_add_epi32(bias, lsb)), hi_mask);
    _mm512_storeu_ps(y + i, _mm512_castsi512_ps(r));
  }
  for (; i < k; ++i) y[i] = bf16_to_fp32(fp32_to_bf16(x[i]));
}

float dot_f32(const float* w, const float* x, int64_t n) {
  return dot_float(
      w, x, n, [](const float* p) { return _mm512_loadu_ps(p); },
      [](const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); });
}

float dot_f16(const uint16_t* w, const float* x, int64_t n) {
  return dot_float(
      w, x, n, [](const uint16_t* p) { return load_f16(p); },
      [](const uint16_t* p, __mmask16 m) { return load_f16(p, m); });
}

float dot_bf16(const uint16_t* w, const float* x, int64_t n) {
  return dot_float(
      w, x, n, [](const uint16_t* p) { return load_bf16(p); },
      [](const uint16_t* p, __mmask16 m) { return load_bf16(p, m); });
}

#include "backend/cpu/vec_kernels_block_dots.h"

constexpr VecKernels kTable = CHANNEL_VEC_KERNEL_TABLE("avx512");

}  // namespace channel::cpu::avx512

namespace channel::cpu {
const VecKernels* vec_kernels_avx512_variant() {
  return &avx512::kTable;
}
}  // namespace channel::cpu

#else  // CHANNEL_SIMD_VNNI

namespace channel::cpu {
const VecKernels* vec_kernels_avx512_variant() {
  return nullptr;
}
}  // namespace channel::cpu

#endif  // CHANNEL_SIMD_VNNI
