// The AVX-512 VNNI variant of the int8 scan (memory_kernels.h int8_dots), compiled with
// CHANNEL_AVX512_FLAGS and -mavx512vnni (CMakeLists.txt) and run where the CPU has VNNI.
#include <cstddef>
#include <cstdint>

#include "backend/cpu/simd.h"
#include "memory/memory_kernels.h"

namespace channel {

#if defined(CHANNEL_SIMD_VNNI)

namespace int8_vnni {
namespace {

// vpdpbusd multiplies unsigned by signed bytes: each row byte is shifted to unsigned
// (c ^ 0x80 == c + 128) and 128 * sum(q) is subtracted at the end. The lanes wrap modulo 2^32,
// but the true sum fits in int32, so the wrapped result is exact.
void int8_dots(const int8_t* rows, size_t stride, size_t n, const int8_t* q, size_t dim,
               int32_t* dots) {
  uint32_t q_sum = 0;
  for (size_t i = 0; i < dim; ++i) q_sum += static_cast<uint32_t>(static_cast<int32_t>(q[i]));
  const uint32_t correction = 128u * q_sum;
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  const size_t tail = dim % 64;
  const __mmask64 tail_mask = tail ? (~0ull >> (64 - tail)) : 0;
  for (size_t r = 0; r < n; ++r) {
    const int8_t* row = rows + r * stride;
    __m512i a0 = _mm512_setzero_si512(), a1 = _mm512_setzero_si512();
    size_t i = 0;
    for (; i + 128 <= dim; i += 128) {
      // The sketch's rows are contiguous and streamed once: asking for the bytes 4 KiB ahead
      // (about a row of 3840) keeps more lines in flight than the hardware prefetcher does
      // from one core (measured: 3.7 -> 2.6 ms over 63 MB on one thread). Prefetches never
      // fault, so running past the last row is harmless.
      _mm_prefetch(reinterpret_cast<const char*>(row + i + 4096), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(row + i + 4096 + 64), _MM_HINT_T0);
      const __m512i c0 = _mm512_xor_si512(_mm512_loadu_si512(row + i), flip);
      const __m512i c1 = _mm512_xor_si512(_mm512_loadu_si512(row + i + 64), flip);
      a0 = _mm512_dpbusd_epi32(a0, c0, _mm512_loadu_si512(q + i));
      a1 = _mm512_dpbusd_epi32(a1, c1, _mm512_loadu_si512(q + i + 64));
    }
    for (; i + 64 <= dim; i += 64) {
      const __m512i c = _mm512_xor_si512(_mm512_loadu_si512(row + i), flip);
      a0 = _mm512_dpbusd_epi32(a0, c, _mm512_loadu_si512(q + i));
    }
    if (tail) {  // masked-off q bytes are 0, so the shifted row bytes there add nothing
      const __m512i c = _mm512_xor_si512(_mm512_maskz_loadu_epi8(tail_mask, row + i), flip);
      a0 = _mm512_dpbusd_epi32(a0, c, _mm512_maskz_loadu_epi8(tail_mask, q + i));
    }
    // Reduced with vector adds, which wrap (the header's reduce_add adds scalar ints, which
    // must not overflow).
    const __m512i a = _mm512_add_epi32(a0, a1);
    const uint32_t sum = static_cast<uint32_t>(simd::hsum_i32(
        _mm256_add_epi32(_mm512_castsi512_si256(a), _mm512_extracti64x4_epi64(a, 1))));
    dots[r] = static_cast<int32_t>(sum - correction);
  }
}

}  // namespace
}  // namespace int8_vnni

const Int8DotsVariant* int8_dots_vnni_variant() {
  static const Int8DotsVariant v{"avx512vnni", int8_vnni::int8_dots};
  return &v;
}

#else  // CHANNEL_SIMD_VNNI

const Int8DotsVariant* int8_dots_vnni_variant() {
  return nullptr;  // this compiler cannot target avx512vnni
}

#endif  // CHANNEL_SIMD_VNNI

}  // namespace channel
