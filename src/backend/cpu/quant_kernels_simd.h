// quant_kernels_simd.h: the SIMD row kernels of quant_kernels.h, written once over an
// instruction-set policy `Isa` and instantiated by quant_kernels_avx2.cpp (maddubs + madd)
// and quant_kernels_avx512.cpp (VNNI dpbusd / dpwssd, 64 quants per step); the AVX-512 K-quant
// GEMM (kquant_gemm_avx512.cpp) takes its unpack_k. Include only from those files, after
// backend/cpu/simd.h, inside their namespace.
//
// K-quants: a super-block is unpacked in registers to 8 x 32 unsigned quants u and 16 i16
// scales (one per 16 elements), the integer sums over g of sc[g] * sum(u * q_x) are taken
// in 8 lanes, and the type's offset and minimums come back through Q8_K's bsums:
//   sumi = sum_g sc[g] * sum_{i in g} u[i] q[i] - offset * sum_g sc[g] * bsums[g]
//   summ = sum_g m[g] * bsums[g];   acc += (d * d_x) * sumi - (dmin * d_x) * summ
// per super-block (exact integers), then two f32 FMAs per super-block in block order, the
// same arithmetic as the AVX-512 K-quant GEMM's lanes (kquant_gemm.h). The integer parts are
// exact, so only the f32 accumulation differs from the reference's order.
#pragma once

namespace simd_detail {

using channel::BlockQ2_K;
using channel::BlockQ3_K;
using channel::BlockQ4_K;
using channel::BlockQ5_K;
using channel::BlockQ6_K;
using channel::BlockQ8_K;
using channel::kQK;
using channel::kQK_K;

// A field of a block that may sit at any address (rows of 84-, 110- or 210-byte blocks, or a
// test's deliberately misaligned buffer): its bytes, never a member access.
#define CHANNEL_FIELD(b, Type, field) (reinterpret_cast<const uint8_t*>(b) + offsetof(Type, field))

inline __m256i load256(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
inline __m128i load128(const uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
using channel::simd::f16_at;  // backend/cpu/simd.h: the one set of helpers
using channel::simd::hmax;
using channel::simd::hsum;
using channel::simd::hsum_i32;
// Byte i = 0xff where bit i of the 32-bit mask is set.
inline __m256i bits_to_bytes(uint32_t bits) {
  const __m256i spread =
      _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)),
                          _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101,
                                             0x0202020202020202, 0x0303030303030303));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
}
// 16 bytes of nibbles -> 32 bytes: low nibbles (elements 0..15), then high (16..31).
inline __m256i nibbles(const uint8_t* qs) {
  const __m128i b = load128(qs);
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(0x0f));
}
// Byte-wise (v & mask) != 0 ? 0xff : 0.
inline __m256i test_bytes(__m256i v, uint8_t mask) {
  const __m256i m = _mm256_set1_epi8(static_cast<char>(mask));
  return _mm256_cmpeq_epi8(_mm256_and_si256(v, m), m);
}

// ---- K-quant super-blocks: unpack to u[8] (32 quants each) and scales -------------------------

struct KUnpacked {
  __m256i u[8];  // elements 32c .. 32c + 31, unsigned
  __m256i sc;    // 16 x i16: the scale of each 16 elements
  __m256i m;     // 16 x i16: the minimum of each 16 elements (zero for Q3_K, Q6_K)
  float d, dmin;
  int offset;
};

inline void unpack_k(const BlockQ2_K* b, KUnpacked* k) {
  const __m128i s = load128(CHANNEL_FIELD(b, BlockQ2_K, scales));
  k->sc = _mm256_cvtepu8_epi16(_mm_and_si128(s, _mm_set1_epi8(0x0f)));
  k->m = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s, 4), _mm_set1_epi8(0x0f)));
  const __m256i three = _mm256_set1_epi8(3);
  for (int n = 0; n < 2; ++n) {
    const __m256i q = load256(CHANNEL_FIELD(b, BlockQ2_K, qs) + 32 * n);
    k->u[4 * n + 0] = _mm256_and_si256(q, three);
    k->u[4 * n + 1] = _mm256_and_si256(_mm256_srli_epi16(q, 2), three);
    k->u[4 * n + 2] = _mm256_and_si256(_mm256_srli_epi16(q, 4), three);
    k->u[4 * n + 3] = _mm256_and_si256(_mm256_srli_epi16(q, 6), three);
  }
  k->d = f16_at(CHANNEL_FIELD(b, BlockQ2_K, d));
  k->dmin = f16_at(CHANNEL_FIELD(b, BlockQ2_K, dmin));
  k->offset = 0;
}

inline void unpack_k(const BlockQ3_K* b, KUnpacked* k) {
  int sc[16];
  channel::q3_k_scales(CHANNEL_FIELD(b, BlockQ3_K, scales), sc);
  alignas(32) int16_t s16[16];
  for (int g = 0; g < 16; ++g) s16[g] = static_cast<int16_t>(sc[g] - 32);
  k->sc = _mm256_load_si256(reinterpret_cast<const __m256i*>(s16));
  k->m = _mm256_setzero_si256();
  const __m256i three = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4);
  const __m256i hm = load256(CHANNEL_FIELD(b, BlockQ3_K, hmask));
  for (int n = 0; n < 2; ++n) {
    const __m256i q = load256(CHANNEL_FIELD(b, BlockQ3_K, qs) + 32 * n);
    for (int j = 0; j < 4; ++j) {
      const __m256i low = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), three);
      const __m256i high =
          _mm256_and_si256(test_bytes(hm, static_cast<uint8_t>(1u << (4 * n + j))), four);
      k->u[4 * n + j] = _mm256_or_si256(low, high);
    }
  }
  k->d = f16_at(CHANNEL_FIELD(b, BlockQ3_K, d));
  k->dmin = 0;
  k->offset = 4;
}

// Q4_K/Q5_K scales: 8 six-bit (scale, minimum) pairs, each for 32 elements, as i16 per 16.
// With the 12 bytes as words u0, u1, u2: scales 0..3 = u0 & 63, minimums 0..3 = u1 & 63;
// scales 4..7 = the low nibbles of u2 with u0's top two bits above them, minimums 4..7 the
// high nibbles of u2 with u1's top two bits (k4_scale_min, four at a time).
template <typename Block>
inline void k4_scales(const Block* b, KUnpacked* k) {
  uint32_t u[3];
  std::memcpy(u, CHANNEL_FIELD(b, Block, scales), 12);
  constexpr uint32_t k6 = 0x3f3f3f3f, k4 = 0x0f0f0f0f, k2 = 0x03030303;
  const uint32_t sc_lo = u[0] & k6, m_lo = u[1] & k6;
  const uint32_t sc_hi = (u[2] & k4) | (((u[0] >> 6) & k2) << 4);
  const uint32_t m_hi = ((u[2] >> 4) & k4) | (((u[1] >> 6) & k2) << 4);
  const __m128i v = _mm_setr_epi32(static_cast<int>(sc_lo), static_cast<int>(sc_hi),
                                   static_cast<int>(m_lo), static_cast<int>(m_hi));
  // Each 32-element scale covers two 16-element groups: duplicate every byte.
  k->sc = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(v, v));
  k->m = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(v, v));
  k->d = f16_at(CHANNEL_FIELD(b, Block, d));
  k->dmin = f16_at(CHANNEL_FIELD(b, Block, dmin));
  k->offset = 0;
}

inline void unpack_k(const BlockQ4_K* b, KUnpacked* k) {
  k4_scales(b, k);
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  for (int j = 0; j < 4; ++j) {
    const __m256i q = load256(CHANNEL_FIELD(b, BlockQ4_K, qs) + 32 * j);
    k->u[2 * j] = _mm256_and_si256(q, low4);
    k->u[2 * j + 1] = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
  }
}

inline void unpack_k(const BlockQ5_K* b, KUnpacked* k) {
  k4_scales(b, k);
  const __m256i low4 = _mm256_set1_epi8(0x0f), bit4 = _mm256_set1_epi8(0x10);
  const __m256i qh = load256(CHANNEL_FIELD(b, BlockQ5_K, qh));
  for (int j = 0; j < 4; ++j) {
    const __m256i q = load256(CHANNEL_FIELD(b, BlockQ5_K, qs) + 32 * j);
    const __m256i h0 = _mm256_and_si256(test_bytes(qh, static_cast<uint8_t>(1u << (2 * j))), bit4);
    const __m256i h1 =
        _mm256_and_si256(test_bytes(qh, static_cast<uint8_t>(1u << (2 * j + 1))), bit4);
    k->u[2 * j] = _mm256_or_si256(_mm256_and_si256(q, low4), h0);
    k->u[2 * j + 1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), low4), h1);
  }
}

inline void unpack_k(const BlockQ6_K* b, KUnpacked* k) {
  k->sc = _mm256_cvtepi8_epi16(load128(CHANNEL_FIELD(b, BlockQ6_K, scales)));
  k->m = _mm256_setzero_si256();
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  for (int n = 0; n < 2; ++n) {
    const __m256i l0 = load256(CHANNEL_FIELD(b, BlockQ6_K, ql) + 64 * n),
                  l1 = load256(CHANNEL_FIELD(b, BlockQ6_K, ql) + 64 * n + 32);
    const __m256i h = load256(CHANNEL_FIELD(b, BlockQ6_K, qh) + 32 * n);
    // Bits 2j..2j+1 of h moved to bits 4..5 (the masks keep 16-bit shifts inside bytes).
    const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(h, _mm256_set1_epi8(0x03)), 4);
    const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(h, _mm256_set1_epi8(0x0c)), 2);
    const __m256i h2 = _mm256_and_si256(h, _mm256_set1_epi8(0x30));
    const __m256i h3 =
        _mm256_srli_epi16(_mm256_and_si256(h, _mm256_set1_epi8(static_cast<char>(0xc0))), 2);
    k->u[4 * n + 0] = _mm256_or_si256(_mm256_and_si256(l0, low4), h0);
    k->u[4 * n + 1] = _mm256_or_si256(_mm256_and_si256(l1, low4), h1);
    k->u[4 * n + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4), h2);
    k->u[4 * n + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4), h3);
  }
  k->d = f16_at(CHANNEL_FIELD(b, BlockQ6_K, d));
  k->dmin = 0;
  k->offset = 32;
}

// Per K type: its block, log2 of its quant offset (q3_K 4, q6_K 32) and whether it has
// minimums.
struct K2 {
  using Block = BlockQ2_K;
  static constexpr int kOffsetShift = 0;
  static constexpr bool kHasMin = true;
};
struct K3 {
  using Block = BlockQ3_K;
  static constexpr int kOffsetShift = 2;
  static constexpr bool kHasMin = false;
};
struct K4 {
  using Block = BlockQ4_K;
  static constexpr int kOffsetShift = 0;
  static constexpr bool kHasMin = true;
};
struct K5 {
  using Block = BlockQ5_K;
  static constexpr int kOffsetShift = 0;
  static constexpr bool kHasMin = true;
};
struct K6 {
  using Block = BlockQ6_K;
  static constexpr int kOffsetShift = 5;
  static constexpr bool kHasMin = false;
};

inline constexpr int kMaxTokens = 8;  // at most this many tokens share one unpacking (Isa::kTokens)

// acc + a * b with one rounding (the f32 FMA of the K-quant GEMM's lanes).
inline float fma_ss(float a, float b, float acc) {
  return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(acc)));
}

// out[t] = row w · token t's activations (x + t * x_stride), t < nt <= kMaxTokens. Each
// super-block is unpacked once for all the tokens. Per super-block and token the integer
// sums are exact (sumi with the offset, summ of the minimums), then
//   acc = fma(sumi, d * d_x, acc);  acc = fma(-summ, dmin * d_x, acc)
// in super-block order: the arithmetic of every lane of the AVX-512 K-quant GEMM
// (kquant_gemm.h), so a token's result does not depend on the batch it came in.
template <typename Isa, typename T>
void dot_k_multi(const void* w, const void* x, size_t x_stride, int nt, int64_t n_blocks,
                 float* out) {
  const auto* pw = static_cast<const uint8_t*>(w);
  const auto* px = static_cast<const uint8_t*>(x);
  float acc[kMaxTokens];
  for (int t = 0; t < nt; ++t) acc[t] = 0.0f;
  constexpr int shift = T::kOffsetShift;
  using Block = typename T::Block;
  for (int64_t b = 0; b < n_blocks; ++b, pw += sizeof(Block), px += sizeof(BlockQ8_K)) {
    KUnpacked k;
    unpack_k(reinterpret_cast<const Block*>(pw), &k);
    const typename Isa::Prepared prepared = Isa::prepare(k.u, k.sc);
    for (int t = 0; t < nt; ++t) {
      const uint8_t* xb = px + t * x_stride;  // a BlockQ8_K, read by byte offsets
      float xd;
      std::memcpy(&xd, xb + offsetof(BlockQ8_K, d), sizeof(xd));
      const __m256i bsums = load256(xb + offsetof(BlockQ8_K, bsums));
      __m256i vi = Isa::scaled_dot(prepared, xb + offsetof(BlockQ8_K, qs));
      if constexpr (shift > 0)  // the offset: sum_g sc[g] * offset * bsums[g]
        vi = _mm256_sub_epi32(vi, _mm256_slli_epi32(_mm256_madd_epi16(k.sc, bsums), shift));
      acc[t] = fma_ss(static_cast<float>(hsum_i32(vi)), k.d * xd, acc[t]);
      if constexpr (T::kHasMin) {
        const int32_t summ = hsum_i32(_mm256_madd_epi16(k.m, bsums));
        acc[t] = fma_ss(-static_cast<float>(summ), k.dmin * xd, acc[t]);
      }
    }
  }
  for (int t = 0; t < nt; ++t) out[t] = acc[t];
}

template <typename Isa, typename T>
float dot_k(const void* w, const void* x, int64_t n_blocks) {
  float out;
  dot_k_multi<Isa, T>(w, x, 0, 1, n_blocks, &out);
  return out;
}

template <typename Block>
void dequantize_k(const void* x, float* y, int64_t k) {
  const auto* p = static_cast<const uint8_t*>(x);
  for (int64_t b = 0; b < k / kQK_K; ++b, p += sizeof(Block), y += kQK_K) {
    KUnpacked u;
    unpack_k(reinterpret_cast<const Block*>(p), &u);
    alignas(32) uint8_t q[kQK_K];
    alignas(32) int16_t sc[16], m[16];
    for (int c = 0; c < 8; ++c) _mm256_store_si256(reinterpret_cast<__m256i*>(q + 32 * c), u.u[c]);
    _mm256_store_si256(reinterpret_cast<__m256i*>(sc), u.sc);
    _mm256_store_si256(reinterpret_cast<__m256i*>(m), u.m);
    const __m256i off = _mm256_set1_epi32(u.offset);
    for (int g = 0; g < 16; ++g) {
      const __m256 dl = _mm256_set1_ps(u.d * static_cast<float>(sc[g]));
      const __m256 ml = _mm256_set1_ps(u.dmin * static_cast<float>(m[g]));
      for (int h = 0; h < 2; ++h) {
        const __m128i q8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + 16 * g + 8 * h));
        const __m256 v = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_cvtepu8_epi32(q8), off));
        _mm256_storeu_ps(y + 16 * g + 8 * h, _mm256_sub_ps(_mm256_mul_ps(dl, v), ml));
      }
    }
  }
}

// ---- activations ------------------------------------------------------------------------------

// 32 floats -> 32 int8 of round_half_even(x * id), in element order.
inline __m256i quantize32(const float* x, __m256 id) {
  __m256i q[4];
  for (int j = 0; j < 4; ++j)
    q[j] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * j), id));
  const __m256i q16a = _mm256_packs_epi32(q[0], q[1]);
  const __m256i q16b = _mm256_packs_epi32(q[2], q[3]);
  return _mm256_permutevar8x32_epi32(_mm256_packs_epi16(q16a, q16b),
                                     _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

inline float amax32(const float* x) {
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  __m256 amax = _mm256_setzero_ps();
  for (int j = 0; j < 4; ++j)
    amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign_bit, _mm256_loadu_ps(x + 8 * j)));
  return hmax(amax);
}

// Sums of 16 consecutive int8 in lanes 0..3 (first 16) and 4..7 (second 16), as i32.
inline __m256i sums16(__m256i q) {
  const __m256i p = _mm256_maddubs_epi16(_mm256_set1_epi8(1), q);
  return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

inline void quantize_row_q8_1(const float* x, void* y, int64_t k) {
  auto* out = static_cast<uint8_t*>(y);
  for (int64_t b = 0; b < k / kQK; ++b, x += kQK, out += sizeof(channel::BlockQ8_1)) {
    const float max = amax32(x);
    const float d = max / 127.0f;
    const __m256i q = quantize32(x, _mm256_set1_ps(max != 0.0f ? 127.0f / max : 0.0f));
    const uint16_t dh = channel::fp32_to_fp16(d);
    const uint16_t sh = channel::fp32_to_fp16(d * static_cast<float>(hsum_i32(sums16(q))));
    std::memcpy(out, &dh, 2);
    std::memcpy(out + 2, &sh, 2);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 4), q);
  }
}

inline void quantize_row_q8_K(const float* x, void* y, int64_t k) {
  auto* out = static_cast<uint8_t*>(y);
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < k / kQK_K; ++b, x += kQK_K, out += sizeof(BlockQ8_K)) {
    BlockQ8_K blk;
    __m256 vmax = _mm256_setzero_ps();
    for (int j = 0; j < kQK_K; j += 8)
      vmax = _mm256_max_ps(vmax, _mm256_andnot_ps(sign_bit, _mm256_loadu_ps(x + j)));
    const float amax = hmax(vmax);
    if (amax == 0.0f) {
      std::memset(&blk, 0, sizeof(blk));
      std::memcpy(out, &blk, sizeof(blk));
      continue;
    }
    float max = 0.0f;  // the first element of largest magnitude, with its sign
    for (int j = 0; j < kQK_K; ++j) {
      if (std::fabs(x[j]) == amax) {
        max = x[j];
        break;
      }
    }
    const float iscale = -127.0f / max;
    const __m256 is = _mm256_set1_ps(iscale);
    alignas(32) int32_t s[8];
    for (int c = 0; c < 8; ++c) {
      // |iscale * x| <= 127 (x's magnitude is at most |max|), so no clamp is needed.
      const __m256i q = quantize32(x + 32 * c, is);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(blk.qs + 32 * c), q);
      _mm256_store_si256(reinterpret_cast<__m256i*>(s), sums16(q));
      blk.bsums[2 * c] = static_cast<int16_t>(s[0] + s[1] + s[2] + s[3]);
      blk.bsums[2 * c + 1] = static_cast<int16_t>(s[4] + s[5] + s[6] + s[7]);
    }
    blk.d = 1.0f / iscale;
    std::memcpy(out, &blk, sizeof(blk));
  }
}

// ---- legacy 32-element blocks -------------------------------------------------------------

// Q4_1 / Q5_1 quants, unsigned.
inline __m256i unpack_min_block(const uint8_t* blk, bool five) {
  __m256i u = nibbles(blk + (five ? 8 : 4));
  if (five) {
    uint32_t qh;
    std::memcpy(&qh, blk + 4, 4);
    u = _mm256_or_si256(u, _mm256_and_si256(bits_to_bytes(qh), _mm256_set1_epi8(0x10)));
  }
  return u;
}

// Q4_1 / Q5_1 (Q8_1 activations) for nt <= kMaxTokens tokens; as dot_k_multi, each token's
// arithmetic is that of nt == 1.
template <typename Isa, bool kFive>
void dot_min_multi(const void* w, const void* x, size_t x_stride, int nt, int64_t n_blocks,
                   float* out) {
  constexpr int64_t kBlock = kFive ? sizeof(channel::BlockQ5_1) : sizeof(channel::BlockQ4_1);
  const auto* pw = static_cast<const uint8_t*>(w);
  const auto* px = static_cast<const uint8_t*>(x);
  __m256 acc[kMaxTokens];
  float summs[kMaxTokens];
  for (int t = 0; t < nt; ++t) {
    acc[t] = _mm256_setzero_ps();
    summs[t] = 0.0f;
  }
  for (int64_t b = 0; b < n_blocks; ++b, pw += kBlock, px += sizeof(channel::BlockQ8_1)) {
    const __m256i u = unpack_min_block(pw, kFive);
    const float dw = f16_at(pw), mw = f16_at(pw + 2);
    for (int t = 0; t < nt; ++t) {
      const uint8_t* xb = px + t * x_stride;
      const __m256i isum = Isa::dot_u8_s8(u, load256(xb + 4));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(dw * f16_at(xb)), acc[t]);
      summs[t] += mw * f16_at(xb + 2);
    }
  }
  for (int t = 0; t < nt; ++t) out[t] = hsum(acc[t]) + summs[t];
}

template <typename Isa>
void dot_q5_0_multi(const void* w, const void* x, size_t x_stride, int nt, int64_t n_blocks,
                    float* out) {
  const auto* pw = static_cast<const uint8_t*>(w);
  const auto* px = static_cast<const uint8_t*>(x);
  __m256 acc[kMaxTokens];
  for (int t = 0; t < nt; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n_blocks;
       ++b, pw += sizeof(channel::BlockQ5_0), px += sizeof(channel::BlockQ8_0)) {
    uint32_t qh;
    std::memcpy(&qh, pw + 2, 4);
    // u - 16, i.e. the nibble minus 16 where the fifth bit is clear.
    const __m256i high =
        _mm256_andnot_si256(bits_to_bytes(qh), _mm256_set1_epi8(static_cast<char>(0xf0)));
    const __m256i q = _mm256_or_si256(nibbles(pw + 6), high);
    const float dw = f16_at(pw);
    for (int t = 0; t < nt; ++t) {
      const uint8_t* xb = px + t * x_stride;
      const __m256i isum = Isa::dot_s8_s8(q, load256(xb + 2));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(dw * f16_at(xb)), acc[t]);
    }
  }
  for (int t = 0; t < nt; ++t) out[t] = hsum(acc[t]);
}

template <void (*kMulti)(const void*, const void*, size_t, int, int64_t, float*)>
float dot_one(const void* w, const void* x, int64_t n_blocks) {
  float out;
  kMulti(w, x, 0, 1, n_blocks, &out);
  return out;
}

template <int kTop, bool kMin>
void dequantize_legacy(const void* x, float* y, int64_t k) {
  constexpr int64_t kBlock =
      kMin ? (kTop == 15 ? sizeof(channel::BlockQ4_1) : sizeof(channel::BlockQ5_1))
           : sizeof(channel::BlockQ5_0);
  const auto* p = static_cast<const uint8_t*>(x);
  for (int64_t b = 0; b < k / kQK; ++b, p += kBlock, y += kQK) {
    alignas(32) uint8_t u[kQK];
    __m256 d, m;
    if constexpr (kMin) {
      _mm256_store_si256(reinterpret_cast<__m256i*>(u), unpack_min_block(p, kTop == 31));
      d = _mm256_set1_ps(f16_at(p));
      m = _mm256_set1_ps(f16_at(p + 2));
    } else {
      uint32_t qh;
      std::memcpy(&qh, p + 2, 4);
      const __m256i high = _mm256_and_si256(bits_to_bytes(qh), _mm256_set1_epi8(0x10));
      _mm256_store_si256(reinterpret_cast<__m256i*>(u), _mm256_or_si256(nibbles(p + 6), high));
      d = _mm256_set1_ps(f16_at(p));
      m = _mm256_setzero_ps();
    }
    const __m256i off = _mm256_set1_epi32(kMin ? 0 : 16);
    for (int j = 0; j < 4; ++j) {
      const __m128i q8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(u + 8 * j));
      const __m256 v = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_cvtepu8_epi32(q8), off));
      // q * d + m unfused, as the reference.
      _mm256_storeu_ps(y + 8 * j, _mm256_add_ps(_mm256_mul_ps(v, d), m));
    }
  }
}

// The table of one instruction set.
template <typename Isa>
const channel::cpu::QuantTypeKernels* kernels_for(channel::GgmlType type) {
  using channel::GgmlType;
  using channel::cpu::QuantTypeKernels;
  static const QuantTypeKernels q4_1{kQK,
                                     sizeof(channel::BlockQ8_1),
                                     quantize_row_q8_1,
                                     dot_one<dot_min_multi<Isa, false>>,
                                     dequantize_legacy<15, true>,
                                     dot_min_multi<Isa, false>,
                                     Isa::kTokens};
  static const QuantTypeKernels q5_0{kQK,
                                     sizeof(channel::BlockQ8_0),
                                     Isa::quantize_row_q8_0,
                                     dot_one<dot_q5_0_multi<Isa>>,
                                     dequantize_legacy<31, false>,
                                     dot_q5_0_multi<Isa>,
                                     Isa::kTokens};
  static const QuantTypeKernels q5_1{kQK,
                                     sizeof(channel::BlockQ8_1),
                                     quantize_row_q8_1,
                                     dot_one<dot_min_multi<Isa, true>>,
                                     dequantize_legacy<31, true>,
                                     dot_min_multi<Isa, true>,
                                     Isa::kTokens};
#define CHANNEL_K_KERNELS(Kt)                                                             \
  QuantTypeKernels {                                                                      \
    kQK_K, sizeof(BlockQ8_K), quantize_row_q8_K, dot_k<Isa, Kt>, dequantize_k<Kt::Block>, \
        dot_k_multi<Isa, Kt>, Isa::kTokens                                                \
  }
  static const QuantTypeKernels q2_k = CHANNEL_K_KERNELS(K2);
  static const QuantTypeKernels q3_k = CHANNEL_K_KERNELS(K3);
  static const QuantTypeKernels q4_k = CHANNEL_K_KERNELS(K4);
  static const QuantTypeKernels q5_k = CHANNEL_K_KERNELS(K5);
  static const QuantTypeKernels q6_k = CHANNEL_K_KERNELS(K6);
#undef CHANNEL_K_KERNELS
  switch (type) {
    case GgmlType::Q4_1:
      return &q4_1;
    case GgmlType::Q5_0:
      return &q5_0;
    case GgmlType::Q5_1:
      return &q5_1;
    case GgmlType::Q2_K:
      return &q2_k;
    case GgmlType::Q3_K:
      return &q3_k;
    case GgmlType::Q4_K:
      return &q4_k;
    case GgmlType::Q5_K:
      return &q5_k;
    case GgmlType::Q6_K:
      return &q6_k;
    default:
      return nullptr;
  }
}

#undef CHANNEL_FIELD

}  // namespace simd_detail
