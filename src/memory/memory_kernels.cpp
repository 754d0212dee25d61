// SIMD versions of memory_kernels.h: AVX-512 (F/BW/VL) and AVX2+F16C paths for the centroid
// scan and f16 conversion, AVX-512 VNNI and AVX2 paths for the int8 scan, the SSE4.2 crc32
// instruction for CRC-32C (three interleaved streams joined by a PCLMULQDQ shift). Without those
// target flags each function is its scalar reference.
#include <cstring>

#include "memory/memory_kernels.h"

#if defined(__AVX2__) || defined(__SSE4_2__)
// GCC 12's AVX-512 headers start conversions from an "undefined" register and then warn
// about it (GCC bug 105593); the warning is about the header, not this code.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#endif

namespace channel {

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define CHANNEL_MEM_AVX512 1
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define CHANNEL_MEM_AVX2 1
#endif

const char* memory_kernels_isa() {
#if defined(CHANNEL_MEM_AVX512)
  return "avx512";
#elif defined(CHANNEL_MEM_AVX2)
  return "avx2";
#else
  return "scalar";
#endif
}

#if defined(__SSE4_2__)
// One stream of the crc32 instruction on the raw (un-inverted) register: 8 bytes per step,
// each step waiting on the last (3 cycles on current x86).
static inline uint32_t crc32c_one_stream(uint32_t state, const uint8_t* p, size_t n) {
  uint64_t c = state;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    c = _mm_crc32_u64(c, w);
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  for (; n > 0; --n, ++p) c32 = _mm_crc32_u8(c32, *p);
  return c32;
}
#endif

#if defined(__SSE4_2__) && defined(__PCLMUL__)
// Polynomials mod P in the reflected form the crc32 instruction uses: bit i of a uint32_t is
// the coefficient of x^(31-i), so x^0 is 0x80000000 and P's low 32 terms are 0x82F63B78.
constexpr uint32_t kCrc32cPoly = 0x82F63B78u;

constexpr uint32_t poly_mul_x(uint32_t a) {  // a * x mod P
  return (a >> 1) ^ ((a & 1u) ? kCrc32cPoly : 0u);
}
constexpr uint32_t poly_mul(uint32_t a, uint32_t b) {  // a * b mod P, Horner over a's terms
  uint32_t r = 0;
  for (int i = 0; i < 32; ++i) {
    r = poly_mul_x(r);
    if ((a >> i) & 1u) r ^= b;
  }
  return r;
}
constexpr uint32_t poly_x_pow(uint64_t e) {  // x^e mod P by square-and-multiply
  uint32_t r = 0x80000000u, sq = 0x40000000u;
  for (; e != 0; e >>= 1, sq = poly_mul(sq, sq))
    if (e & 1u) r = poly_mul(r, sq);
  return r;
}
static_assert(poly_x_pow(32) == kCrc32cPoly, "x^32 mod P is P's low terms");
static_assert(poly_x_pow(33) == poly_mul_x(kCrc32cPoly));

// Three interleaved streams over blocks A, B, C of `Block` bytes each. With raw registers,
// state(A||B||C) = state(A) * x^(16 Block) + state(B) * x^(8 Block) + state(C) (state(B),
// state(C) started from 0). A carry-less product of two reflected 32-bit values is the 63-bit
// product shifted by one term (it lands as a * b * x in the 64-bit reflected form), and
// crc32(0, v) reduces v * x^32 mod P; so multiplying by k = x^(m - 33) and reducing with
// crc32 yields state * x^m mod P, a shift past m bits. The two products are reduced together
// since reduction is linear.
template <size_t Block>
struct Crc32cShift {
  static_assert(Block % 8 == 0 && Block >= 8);
  static constexpr uint32_t k2 = poly_x_pow(16 * Block - 33);  // shifts A past B and C
  static constexpr uint32_t k1 = poly_x_pow(8 * Block - 33);   // shifts B past C
};

template <size_t Block>
static inline uint32_t crc32c_three_streams(uint32_t state, const uint8_t*& data, size_t& n) {
  constexpr size_t kRound = 3 * Block;
  const uint8_t* p = data;  // locals, so the loop need not store through the references
  size_t left = n;
  for (; left >= kRound; left -= kRound, p += kRound) {
    uint64_t a = state, b = 0, c = 0;
    for (size_t i = 0; i < Block; i += 8) {
      uint64_t wa, wb, wc;
      std::memcpy(&wa, p + i, 8);
      std::memcpy(&wb, p + Block + i, 8);
      std::memcpy(&wc, p + 2 * Block + i, 8);
      a = _mm_crc32_u64(a, wa);
      b = _mm_crc32_u64(b, wb);
      c = _mm_crc32_u64(c, wc);
    }
    const __m128i pa =
        _mm_clmulepi64_si128(_mm_cvtsi64_si128(static_cast<long long>(a)),
                             _mm_cvtsi32_si128(static_cast<int>(Crc32cShift<Block>::k2)), 0);
    const __m128i pb =
        _mm_clmulepi64_si128(_mm_cvtsi64_si128(static_cast<long long>(b)),
                             _mm_cvtsi32_si128(static_cast<int>(Crc32cShift<Block>::k1)), 0);
    const uint64_t folded = static_cast<uint64_t>(_mm_cvtsi128_si64(_mm_xor_si128(pa, pb)));
    state = static_cast<uint32_t>(_mm_crc32_u64(0, folded)) ^ static_cast<uint32_t>(c);
  }
  data = p;
  n = left;
  return state;
}
#endif

uint32_t crc32c(uint32_t crc, const void* data, size_t n) {
#if defined(__SSE4_2__) && defined(__PCLMUL__)
  const uint8_t* p = static_cast<const uint8_t*>(data);
  uint32_t state = ~crc;
  // Rounds of 12 KiB while the input lasts, then of 3 KiB, 768 and 192 bytes; each round's
  // combine is ~10 cycles, small against the 3 x Block/8 crc32 steps it saves waiting on.
  // (Measured: the middle tiers make 1-4 KiB inputs 5-15 % faster than 12 KiB/1.5 KiB/192.)
  if (n >= 3 * 64) {
    state = crc32c_three_streams<4096>(state, p, n);
    state = crc32c_three_streams<1024>(state, p, n);
    state = crc32c_three_streams<256>(state, p, n);
    state = crc32c_three_streams<64>(state, p, n);
  }
  return ~crc32c_one_stream(state, p, n);
#elif defined(__SSE4_2__)
  return ~crc32c_one_stream(~crc, static_cast<const uint8_t*>(data), n);
#else
  return crc32c_ref(crc, data, n);
#endif
}

#if defined(CHANNEL_MEM_AVX512)

static inline float hsum(__m512 v) {
  return _mm512_reduce_add_ps(v);
}

void centroid_dots(const uint8_t* base, size_t stride_bytes, size_t n, const float* q, size_t dim,
                   float* dots, float* norms2) {
  const size_t tail = dim % 16;
  const __mmask16 tail_mask = static_cast<__mmask16>((1u << tail) - 1u);
  for (size_t r = 0; r < n; ++r) {
    const uint16_t* row = reinterpret_cast<const uint16_t*>(base + r * stride_bytes);
    __m512 d0 = _mm512_setzero_ps(), d1 = _mm512_setzero_ps();
    __m512 n0 = _mm512_setzero_ps(), n1 = _mm512_setzero_ps();
    size_t i = 0;
    for (; i + 32 <= dim; i += 32) {
      const __m512 c0 =
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + i)));
      const __m512 c1 =
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + i + 16)));
      d0 = _mm512_fmadd_ps(c0, _mm512_loadu_ps(q + i), d0);
      d1 = _mm512_fmadd_ps(c1, _mm512_loadu_ps(q + i + 16), d1);
      n0 = _mm512_fmadd_ps(c0, c0, n0);
      n1 = _mm512_fmadd_ps(c1, c1, n1);
    }
    for (; i + 16 <= dim; i += 16) {
      const __m512 c =
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + i)));
      d0 = _mm512_fmadd_ps(c, _mm512_loadu_ps(q + i), d0);
      n0 = _mm512_fmadd_ps(c, c, n0);
    }
    if (tail) {
      const __m512 c = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(tail_mask, row + i));
      d0 = _mm512_fmadd_ps(c, _mm512_maskz_loadu_ps(tail_mask, q + i), d0);
      n0 = _mm512_fmadd_ps(c, c, n0);
    }
    dots[r] = hsum(_mm512_add_ps(d0, d1));
    norms2[r] = hsum(_mm512_add_ps(n0, n1));
  }
}

void f32_to_f16_row(const float* x, uint16_t* y, size_t k) {
  size_t i = 0;
  for (; i + 16 <= k; i += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  }
  if (i < k) f32_to_f16_row_ref(x + i, y + i, k - i);
}

#elif defined(CHANNEL_MEM_AVX2)

static inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

void centroid_dots(const uint8_t* base, size_t stride_bytes, size_t n, const float* q, size_t dim,
                   float* dots, float* norms2) {
  for (size_t r = 0; r < n; ++r) {
    const uint16_t* row = reinterpret_cast<const uint16_t*>(base + r * stride_bytes);
    __m256 d = _mm256_setzero_ps(), nn = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 8 <= dim; i += 8) {
      const __m256 c = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + i)));
      d = _mm256_fmadd_ps(c, _mm256_loadu_ps(q + i), d);
      nn = _mm256_fmadd_ps(c, c, nn);
    }
    float dot = hsum(d), norm = hsum(nn);
    if (i < dim) {
      float td = 0.0f, tn = 0.0f;
      centroid_dots_ref(reinterpret_cast<const uint8_t*>(row + i), 0, 1, q + i, dim - i, &td, &tn);
      dot += td;
      norm += tn;
    }
    dots[r] = dot;
    norms2[r] = norm;
  }
}

void f32_to_f16_row(const float* x, uint16_t* y, size_t k) {
  size_t i = 0;
  for (; i + 8 <= k; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  }
  if (i < k) f32_to_f16_row_ref(x + i, y + i, k - i);
}

#else

void centroid_dots(const uint8_t* base, size_t stride_bytes, size_t n, const float* q, size_t dim,
                   float* dots, float* norms2) {
  centroid_dots_ref(base, stride_bytes, n, q, dim, dots, norms2);
}

void f32_to_f16_row(const float* x, uint16_t* y, size_t k) {
  f32_to_f16_row_ref(x, y, k);
}

#endif

// --- int8 rows . int8 query ------------------------------------------------------------------

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
#define CHANNEL_MEM_INT8_VNNI 1
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
    __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(a), _mm512_extracti64x4_epi64(a, 1));
    __m128i x = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    x = _mm_add_epi32(x, _mm_shuffle_epi32(x, 0x4E));
    x = _mm_add_epi32(x, _mm_shuffle_epi32(x, 0xB1));
    const uint32_t sum = static_cast<uint32_t>(_mm_cvtsi128_si32(x));
    dots[r] = static_cast<int32_t>(sum - correction);
  }
}
#endif

#if defined(__AVX2__)
#define CHANNEL_MEM_INT8_AVX2 1
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
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    int32_t sum = _mm_cvtsi128_si32(s);
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
#if defined(CHANNEL_MEM_INT8_VNNI)
    {"avx512vnni", int8_dots_avx512vnni},
#endif
#if defined(CHANNEL_MEM_INT8_AVX2)
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
#if defined(CHANNEL_MEM_INT8_VNNI)
  int8_dots_avx512vnni(rows, stride, n, q, dim, dots);
#elif defined(CHANNEL_MEM_INT8_AVX2)
  int8_dots_avx2(rows, stride, n, q, dim, dots);
#else
  int8_dots_ref(rows, stride, n, q, dim, dots);
#endif
}

}  // namespace channel
