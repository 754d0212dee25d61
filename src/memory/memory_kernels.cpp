// Dispatch of memory_kernels.h: the centroid scan and f16 conversion run the best variant
// the CPU executes (memory_kernels_avx512.cpp, memory_kernels_avx2.cpp, or the scalar
// references); the int8 scan's AVX-512 VNNI and AVX2 paths are here.
#include <cstring>
#include <vector>

#include "backend/cpu/simd.h"
#include "memory/memory_kernels.h"

namespace channel {

const CentroidKernels* centroid_kernels_avx512();
const CentroidKernels* centroid_kernels_avx2();

std::span<const CentroidKernels> centroid_kernel_variants() {
  static const std::vector<CentroidKernels> all = [] {
    std::vector<CentroidKernels> v;
    if (const CentroidKernels* k = centroid_kernels_avx512(); k && simd::cpu_runs_avx512())
      v.push_back(*k);
    if (const CentroidKernels* k = centroid_kernels_avx2(); k && simd::cpu_runs_avx2())
      v.push_back(*k);
    v.push_back({"scalar", centroid_dots_ref, f32_to_f16_row_ref});
    return v;
  }();
  return all;
}

namespace {

const CentroidKernels& best_centroid_kernels() {
  static const CentroidKernels& b = centroid_kernel_variants().front();
  return b;
}

}  // namespace

const char* memory_kernels_isa() {
  return best_centroid_kernels().isa;
}

void centroid_dots(const uint8_t* base, size_t stride_bytes, size_t n, const float* q, size_t dim,
                   float* dots, float* norms2) {
  best_centroid_kernels().centroid_dots(base, stride_bytes, n, q, dim, dots, norms2);
}

void f32_to_f16_row(const float* x, uint16_t* y, size_t k) {
  best_centroid_kernels().f32_to_f16_row(x, y, k);
}

// --- int8 rows . int8 query ------------------------------------------------------------------

#if defined(CHANNEL_SIMD_VNNI)
// vpdpbusd multiplies unsigned by signed bytes: each row byte is shifted to unsigned
// (c ^ 0x80 == c + 128) and 128 * sum(q) is subtracted at the end. The lanes wrap modulo 2^32,
// but the true sum fits in int32, so the wrapped result is exact.
static void int8_dots_avx512vnni(const int8_t* rows, size_t stride, size_t n, const int8_t* q,
                                 size_t dim, int32_t* dots) {
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
#endif

#if defined(CHANNEL_SIMD_AVX2)
// vpmaddubsw also takes unsigned x signed bytes: |c| times q with c's sign. Pairs of products
// are summed in int16, at most 2 * 128 * 127 in magnitude (no saturation since |q| <= 127).
static void int8_dots_avx2(const int8_t* rows, size_t stride, size_t n, const int8_t* q, size_t dim,
                           int32_t* dots) {
  const __m256i ones = _mm256_set1_epi16(1);
  for (size_t r = 0; r < n; ++r) {
    const int8_t* row = rows + r * stride;
    __m256i acc = _mm256_setzero_si256();
    size_t i = 0;
    for (; i + 32 <= dim; i += 32) {
      const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + i));
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + i));
      const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(c), _mm256_sign_epi8(x, c));
      acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, ones));
    }
    int32_t sum = simd::hsum_i32(acc);
    if (i < dim) {
      int32_t t = 0;
      int8_dots_ref(row + i, 0, 1, q + i, dim - i, &t);
      sum += t;
    }
    dots[r] = sum;
  }
}
#endif

static const Int8DotsVariant kInt8Variants[] = {
#if defined(CHANNEL_SIMD_VNNI)
    {"avx512vnni", int8_dots_avx512vnni},
#endif
#if defined(CHANNEL_SIMD_AVX2)
    {"avx2", int8_dots_avx2},
#endif
    {"scalar", int8_dots_ref},
};

size_t int8_dots_variants(const Int8DotsVariant** out) {
  *out = kInt8Variants;
  return sizeof kInt8Variants / sizeof kInt8Variants[0];
}

void int8_dots(const int8_t* rows, size_t stride, size_t n, const int8_t* q, size_t dim,
               int32_t* dots) {
#if defined(CHANNEL_SIMD_VNNI)
  int8_dots_avx512vnni(rows, stride, n, q, dim, dots);
#elif defined(CHANNEL_SIMD_AVX2)
  int8_dots_avx2(rows, stride, n, q, dim, dots);
#else
  int8_dots_ref(rows, stride, n, q, dim, dots);
#endif
}

}  // namespace channel
