// AVX2 instantiation of quant_kernels_simd.h: u8 x s8 products by maddubs (pairs to i16,
// never saturating here: quants are at most 63 and activations at most 127 in magnitude),
// then madd with the per-16 scales.
#include "backend/cpu/quant_kernels.h"
#include "backend/cpu/vec_kernels_isa.h"

#if defined(CHANNEL_SIMD_AVX2)

#include "backend/cpu/simd.h"

#include <cmath>
#include <cstddef>
#include <cstring>

#include "ops/fp16.h"
#include "ops/quant.h"
#include "ops/quant_k.h"
#include "ops/quant_legacy.h"

namespace channel::cpu::avx2 {
namespace {
#include "backend/cpu/quant_kernels_simd.h"
using namespace simd_detail;

struct Avx2 {
  static __m256i dot_u8_s8(__m256i u, __m256i x) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, x), _mm256_set1_epi16(1));
  }
  static __m256i dot_s8_s8(__m256i a, __m256i b) {
    return dot_u8_s8(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
  }
  // A super-block's quants and, per 32 of them, its two group scales spread over the i16
  // lanes of their products (lanes 0..7: group 2c, 8..15: group 2c + 1), built once for all
  // the tokens that use it.
  struct Prepared {
    __m256i u[8], s[8];
  };
  static Prepared prepare(const __m256i u[8], __m256i sc) {
    alignas(32) int16_t scale[16];
    _mm256_store_si256(reinterpret_cast<__m256i*>(scale), sc);
    Prepared p;
    for (int c = 0; c < 8; ++c) {
      p.u[c] = u[c];
      p.s[c] = _mm256_set_m128i(_mm_set1_epi16(scale[2 * c + 1]), _mm_set1_epi16(scale[2 * c]));
    }
    return p;
  }
  // sum_g sc[g] * sum_{i in g} u[i] * x[i] over 256 quants, in 8 lanes.
  static __m256i scaled_dot(const Prepared& w, const uint8_t* xq) {
    __m256i acc = _mm256_setzero_si256();
    for (int c = 0; c < 8; ++c) {
      const __m256i p = _mm256_maddubs_epi16(w.u[c], load256(xq + 32 * c));
      acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, w.s[c]));
    }
    return acc;
  }
  static constexpr int kTokens = 4;  // tokens per weight unpacking (16 ymm registers: 4
                                     // accumulators beside the 8 unpacked vectors)
  static void quantize_row_q8_0(const float* x, void* y, int64_t k) {
    avx2::quantize_row_q8_0(x, y, k);
  }
};

}  // namespace

const QuantTypeKernels* quant_type_kernels(GgmlType type) {
  return simd_detail::kernels_for<Avx2>(type);
}

}  // namespace channel::cpu::avx2

namespace channel::cpu {
const QuantKernels* quant_kernels_avx2_variant() {
  static const QuantKernels v{"avx2", avx2::quant_type_kernels};
  return &v;
}
}  // namespace channel::cpu

#else  // CHANNEL_SIMD_AVX2

namespace channel::cpu {
const QuantKernels* quant_kernels_avx2_variant() {
  return nullptr;
}
}  // namespace channel::cpu

#endif  // CHANNEL_SIMD_AVX2
