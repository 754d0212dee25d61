// AVX-512 instantiation of quant_kernels_simd.h: VNNI dpbusd for the 32-quant dots, and
// for K-quants 64 quants per step: maddubs on 512-bit registers, then dpwssd with the
// per-16 scales spread by one vpermw.
#include "backend/cpu/quant_kernels.h"
#include "backend/cpu/vec_kernels_isa.h"

#if defined(CHANNEL_SIMD_VNNI)

#include "backend/cpu/simd.h"

#include <cmath>
#include <cstddef>
#include <cstring>

#include "ops/fp16.h"
#include "ops/quant.h"
#include "ops/quant_k.h"
#include "ops/quant_legacy.h"

namespace channel::cpu::avx512 {
namespace {
#include "backend/cpu/quant_kernels_simd.h"
using namespace simd_detail;

// Lane i of step c's scale vector is group 4c + i / 8 (each group: 16 quants = 8 i16 pairs).
struct ScaleIndex {
  __m512i idx[4];
  ScaleIndex() {
    for (int c = 0; c < 4; ++c) {
      alignas(64) int16_t v[32];
      for (int i = 0; i < 32; ++i) v[i] = static_cast<int16_t>(4 * c + i / 8);
      idx[c] = _mm512_load_si512(v);
    }
  }
};

struct Avx512 {
  static __m256i dot_u8_s8(__m256i u, __m256i x) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, x);
  }
  static __m256i dot_s8_s8(__m256i a, __m256i b) {
    return dot_u8_s8(_mm256_abs_epi8(a), _mm256_sign_epi8(b, a));
  }
  // A super-block's quants in pairs of 32 and its scales spread to the i16 lanes of each
  // pair's products, built once for all the tokens that use it.
  struct Prepared {
    __m512i u[4], s[4];
  };
  static Prepared prepare(const __m256i u[8], __m256i sc) {
    static const ScaleIndex ix;
    const __m512i sc512 = _mm512_castsi256_si512(sc);
    Prepared p;
    for (int c = 0; c < 4; ++c) {
      p.u[c] = _mm512_inserti64x4(_mm512_castsi256_si512(u[2 * c]), u[2 * c + 1], 1);
      p.s[c] = _mm512_permutexvar_epi16(ix.idx[c], sc512);
    }
    return p;
  }
  static __m256i scaled_dot(const Prepared& w, const uint8_t* xq) {
    __m512i acc = _mm512_setzero_si512();
    for (int c = 0; c < 4; ++c) {
      const __m512i p = _mm512_maddubs_epi16(w.u[c], _mm512_loadu_si512(xq + 64 * c));
      acc = _mm512_dpwssd_epi32(acc, p, w.s[c]);
    }
    return _mm256_add_epi32(_mm512_castsi512_si256(acc), _mm512_extracti64x4_epi64(acc, 1));
  }
  static constexpr int kTokens = 4;  // tokens per weight unpacking (8 measured no faster)
  static void quantize_row_q8_0(const float* x, void* y, int64_t k) {
    avx512::quantize_row_q8_0(x, y, k);
  }
};

}  // namespace

const QuantTypeKernels* quant_type_kernels(GgmlType type) {
  return simd_detail::kernels_for<Avx512>(type);
}

}  // namespace channel::cpu::avx512

namespace channel::cpu {
const QuantKernels* quant_kernels_avx512_variant() {
  static const QuantKernels v{"avx512", avx512::quant_type_kernels};
  return &v;
}
}  // namespace channel::cpu

#else  // CHANNEL_SIMD_VNNI

namespace channel::cpu {
const QuantKernels* quant_kernels_avx512_variant() {
  return nullptr;
}
}  // namespace channel::cpu

#endif  // CHANNEL_SIMD_VNNI
