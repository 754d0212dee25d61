// hash.h: CRC-32C, its bitwise reference and the SSE4.2 crc32 instruction path (three
// interleaved streams joined by a PCLMULQDQ shift). Without those target flags crc32c is the
// reference.
#include "util/hash.h"

#include <cstring>

#if defined(__SSE4_2__)
#include <immintrin.h>
#endif

namespace channel {

uint32_t crc32c_ref(uint32_t crc, const void* data, size_t n) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int b = 0; b < 8; ++b) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

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

uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b) {
  // The register after A, shifted past B's 8 len_b bits, plus B's own: the inversions at
  // the start and end of each cancel (multiplication mod P is linear).
  return poly_mul(crc_a, poly_x_pow(8 * len_b)) ^ crc_b;
}

uint32_t crc32c_shift(uint64_t len_b) {
  return poly_x_pow(8 * len_b);
}
uint32_t crc32c_mul(uint32_t a, uint32_t b) {
  return poly_mul(a, b);
}

uint32_t crc32c_join(std::span<const uint32_t> parts, uint64_t part_len) {
  const uint32_t shift = poly_x_pow(8 * part_len);  // once: every part is as long
  uint32_t crc = 0;
  for (const uint32_t part : parts) crc = poly_mul(crc, shift) ^ part;
  return crc;
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

}  // namespace channel
