// AVX-512 decode matvecs for Q4_0, Q5_0 and Q8_0 (quant_matvec.h): 16 rows at a time, rows
// in the lanes.
//
// Q4_0, Q5_0: per 32-element block the 16 rows' 16 nibble bytes are loaded and transposed in
// registers (4 inserts per 4 rows, one in-lane dword transpose each, then a 4 x 4 transpose of
// the 128-bit lanes), so that vector g holds dword g of every row: its low nibbles are elements
// 4g..4g+3 and its high nibbles elements 16+4g..16+4g+3. Eight vpdpbusd with broadcast
// activation dwords then give the 16 rows' exact integer dots at once, with no horizontal
// sums; the scales come in with one gather (Q5_0: the fifth bits with another, spread to
// the bytes by vpshufbitqmb). Each lane is the arithmetic of a lane of the prompt GEMM
// (matmul_kernels_avx512.cpp, quant_tile): the integer dot of the unsigned quants plus the
// token's correction -zero point * sum q, converted to f32, times (d_w * d_x), fused into
// the running sum in block order; so decode and prompt give the same bits.
#include "backend/cpu/quant_matvec.h"

#if defined(CHANNEL_SIMD_VNNI)

#include "backend/cpu/simd.h"

#include <algorithm>
#include <cstring>

#include "backend/cpu/quant_groups.h"
#include "ops/quant.h"

namespace channel::cpu::avx512 {
namespace {

__m128i load128(const uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

int32_t load_i32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// rows[i] = row min(r + i, r1 - 1) of w (the last rows repeat in the spare lanes); returns
// each row's byte offset from rows[0], in its lane, for the scale gathers.
__m512i row_group(const MatmulWeights& w, int64_t r, int64_t r1, const uint8_t* rows[16]) {
  alignas(64) int32_t offset[16];
  for (int i = 0; i < 16; ++i) {
    const int64_t row = std::min(r + i, r1 - 1);
    rows[i] = w.data + static_cast<size_t>(row) * w.row_bytes;
    offset[i] = static_cast<int32_t>(static_cast<int64_t>(rows[i] - rows[0]));
  }
  return _mm512_load_si512(offset);
}

// acc + f32(sum) * (d_w * d_x), lane by lane: the block's exact integer dots (lane i = row i)
// times the product of the rows' f16 scales (gathered at block + gather_at[i]) and the
// token's, fused into the running sums, as the prompt GEMM's quant_tile does.
[[gnu::always_inline]] inline __m512 add_scaled_block(__m512 acc, __m512i sum, __m512i gather_at,
                                                      const uint8_t* block, const uint8_t* xb) {
  const __m512i bits = _mm512_i32gather_epi32(gather_at, block, 1);
  const __m512 dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(bits));
  uint16_t dx;
  std::memcpy(&dx, xb, sizeof(dx));
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(dw, _mm512_set1_ps(_cvtsh_ss(dx))),
                         acc);
}

// v[g] lane i = dword g of the 16 bytes at rows[i] + at.
[[gnu::always_inline]] inline void transpose_rows(const uint8_t* const rows[16], int64_t at, __m512i v[4]) {
  // Within a 128-bit lane: dword 4j + g -> 4g + j (a 4 x 4 transpose).
  const __m512i in_lane = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  __m512i z[4];  // z[k] lane 4g + j = dword g of row 4k + j
  for (int k = 0; k < 4; ++k) {
    __m512i q = _mm512_castsi128_si512(load128(rows[4 * k] + at));
    q = _mm512_inserti32x4(q, load128(rows[4 * k + 1] + at), 1);
    q = _mm512_inserti32x4(q, load128(rows[4 * k + 2] + at), 2);
    q = _mm512_inserti32x4(q, load128(rows[4 * k + 3] + at), 3);
    z[k] = _mm512_permutexvar_epi32(in_lane, q);
  }
  // 128-bit lane g of z[k] -> lane k of v[g].
  const __m512i t0 = _mm512_shuffle_i32x4(z[0], z[1], 0x44);  // z0.0 z0.1 z1.0 z1.1
  const __m512i t1 = _mm512_shuffle_i32x4(z[0], z[1], 0xee);  // z0.2 z0.3 z1.2 z1.3
  const __m512i t2 = _mm512_shuffle_i32x4(z[2], z[3], 0x44);
  const __m512i t3 = _mm512_shuffle_i32x4(z[2], z[3], 0xee);
  v[0] = _mm512_shuffle_i32x4(t0, t2, 0x88);  // z0.0 z1.0 z2.0 z3.0
  v[1] = _mm512_shuffle_i32x4(t0, t2, 0xdd);
  v[2] = _mm512_shuffle_i32x4(t1, t3, 0x88);
  v[3] = _mm512_shuffle_i32x4(t1, t3, 0xdd);
}

}  // namespace

namespace {

// Q4_0 (kFive false) or Q5_0: 16 rows at a time from r.
template <bool kFive>
void matvec16(const MatmulWeights& w, const uint8_t* xq, const int32_t* xcorr, int64_t r0,
              int64_t r1, float* y) {
  constexpr int64_t kBlock = kFive ? 22 : 18;  // f16 scale, (Q5_0: 4 bytes of fifth bits), nibbles
  constexpr int64_t kNibbles = kFive ? 6 : 2;
  const int64_t nb = w.cols / kQK;
  __m512i pick[2][4];  // Q5_0: fifth_bit_picks (quant_matvec.h)
  if constexpr (kFive) fifth_bit_picks(pick);
  for (int64_t r = r0; r < r1; r += 16) {
    const uint8_t* rows[16];
    const __m512i gather_at = row_group(w, r, r1, rows);
    // The next 16 rows (adjacent in memory) are fetched while these are read: one block of
    // each row is 16 * kBlock bytes, so block b prefetches that many bytes of the next group.
    // Within the group, 16 short interleaved streams defeat the hardware prefetcher.
    const uint8_t* next = r + 16 < r1 ? rows[0] + 16 * w.row_bytes : nullptr;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t at = b * kBlock;
      if (next) {
        for (int64_t j = 0; j < 16 * kBlock; j += 64)
          _mm_prefetch(reinterpret_cast<const char*>(next + 16 * at + j), _MM_HINT_T0);  // simd.h
      }
      __m512i v[4];
      transpose_rows(rows, at + kNibbles, v);
      __m512i qh = _mm512_setzero_si512();  // read only for Q5 (kFive)
      if constexpr (kFive) qh = _mm512_i32gather_epi32(gather_at, rows[0] + at + 2, 1);
      const uint8_t* xb = xq + b * static_cast<int64_t>(sizeof(BlockQ8_0));
      __m512i sum = _mm512_set1_epi32(xcorr[b]);
      for (int g = 0; g < 4; ++g) {
        __m512i lo, hi;
        lane_quants<kFive>(v[g], qh, pick, g, lo, hi);
        sum = _mm512_dpbusd_epi32(sum, lo, _mm512_set1_epi32(load_i32(xb + 2 + 4 * g)));
        sum = _mm512_dpbusd_epi32(sum, hi, _mm512_set1_epi32(load_i32(xb + 2 + 16 + 4 * g)));
      }
      acc = add_scaled_block(acc, sum, gather_at, rows[0] + at, xb);
    }
    const int64_t n = std::min<int64_t>(16, r1 - r);
    _mm512_mask_storeu_ps(y + r, static_cast<__mmask16>((1u << n) - 1), acc);
  }
}

}  // namespace

// ---- Q8_0 -----------------------------------------------------------------------------------
//
// Per block the 16 rows' 32 quants come two rows to a vector (row a in the low 256 bits, row
// a + 4 in the high), flipped to unsigned (q + 128) and multiplied with the token's 32 quants
// (in both halves) by one vpdpbusd each: 8 vectors of 8 partial sums per row. fold_rows adds
// those to the 16 rows' exact integer dots, in row order, with three rounds of unpacks and
// adds; then the same per-lane arithmetic as Q4_0 above and as quant_tile.

namespace {

// The row in the low half of partial-sum vector k (row + 4 in its high half): rows 0-3 and
// 8-11, so that fold_rows ends with row i in lane i.
constexpr int q8_row_of(int k) {
  return k < 4 ? k : k + 4;
}

// Lane i: the sum of the 8 dwords of row i in p (p[k]: 128-bit lanes 0-1 row q8_row_of(k),
// lanes 2-3 row q8_row_of(k) + 4). Integer adds: exact in any order.
__m512i fold_rows(const __m512i p[8]) {
  __m512i t[4];  // in each 128-bit lane: two dwords of p[2k], two of p[2k + 1], interleaved
  for (int k = 0; k < 4; ++k) {
    t[k] = _mm512_add_epi32(_mm512_unpacklo_epi32(p[2 * k], p[2 * k + 1]),
                            _mm512_unpackhi_epi32(p[2 * k], p[2 * k + 1]));
  }
  __m512i u[2];  // u[h] 128-bit lane L, dword j: the sum of lane L of p[4h + j]
  for (int h = 0; h < 2; ++h) {
    u[h] = _mm512_add_epi32(_mm512_unpacklo_epi64(t[2 * h], t[2 * h + 1]),
                            _mm512_unpackhi_epi64(t[2 * h], t[2 * h + 1]));
  }
  // Lanes 0+1 of u[0] are rows 0-3, its lanes 2+3 rows 4-7; u[1] rows 8-11 and 12-15.
  return _mm512_add_epi32(_mm512_shuffle_i32x4(u[0], u[1], 0x88),
                          _mm512_shuffle_i32x4(u[0], u[1], 0xdd));
}

}  // namespace

void matvec_q8_0(const MatmulWeights& w, const uint8_t* xq, const int32_t* xcorr, int64_t r0,
                 int64_t r1, float* y) {
  constexpr int64_t kBlock = 34;  // f16 scale, 32 int8 quants
  // Prefetch distance in each row's stream: row i, then row i + 16 (the next step's lane i),
  // so that the start of the next 16 rows is in flight when this step ends. Without the
  // prefetches the loop read 4 GB/s a thread; 1024 beat 384, 768, 1536 and 2048 on Zen 5
  // (docs/performance.md).
  constexpr int64_t kAhead = 1024;
  const int64_t nb = w.cols / kQK;
  const int64_t row_bytes = static_cast<int64_t>(w.row_bytes);
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t r = r0; r < r1; r += 16) {
    const uint8_t* rows[16];
    const __m512i gather_at = row_group(w, r, r1, rows);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t at = b * kBlock;
      int64_t ahead = at + kAhead;
      if (ahead >= row_bytes) ahead += 15 * row_bytes;  // into row i + 16
      for (int i = 0; i < 16; ++i)
        simd::prefetch_rows(rows[i] + ahead);
      const uint8_t* xb = xq + b * static_cast<int64_t>(sizeof(BlockQ8_0));
      const __m512i xv =
          _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + 2)));
      __m512i p[8];
      for (int k = 0; k < 8; ++k) {
        const int a = q8_row_of(k);
        const __m512i q = _mm512_inserti64x4(
            _mm512_castsi256_si512(
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[a] + at + 2))),
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[a + 4] + at + 2)), 1);
        p[k] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_xor_si512(q, flip), xv);
      }
      const __m512i sum = _mm512_add_epi32(fold_rows(p), _mm512_set1_epi32(xcorr[b]));
      acc = add_scaled_block(acc, sum, gather_at, rows[0] + at, xb);
    }
    const int64_t n = std::min<int64_t>(16, r1 - r);
    _mm512_mask_storeu_ps(y + r, static_cast<__mmask16>((1u << n) - 1), acc);
  }
}

namespace {

// Q4_0 (kFive false) or Q5_0 from 16-row groups (quant_groups.h): per block the record's four
// parts are the vectors transpose_rows builds, its 16 scales the ones add_scaled_block
// gathers (Q5_0: its fifth bits the ones matvec16 gathers), so the lanes do the same
// arithmetic in the same order as matvec16. One contiguous stream, prefetched 8 records
// ahead: for Q4_0 on Zen 4 4 records gave 48 tok/s on the 1B shape, 8 gave 49-52, 12 and 16
// 38-50 (docs/performance.md).
template <bool kFive>
void matvec_groups(const MatmulWeights& w, const uint8_t* xq, const int32_t* xcorr, int64_t r0,
                   int64_t r1, float* y) {
  constexpr GgmlType kType = kFive ? GgmlType::Q5_0 : GgmlType::Q4_0;
  const int64_t record = group_record_bytes(kType), nibbles = group_nibbles_at(kType);
  const int64_t ahead = 8 * record;
  const int64_t nb = w.cols / kQK;
  __m512i pick[2][4];  // Q5_0: fifth_bit_picks (quant_matvec.h)
  if constexpr (kFive) fifth_bit_picks(pick);
  for (int64_t r = r0; r < r1; r += kGroupRows) {
    const uint8_t* rec = w.groups + (r / kGroupRows) * nb * record;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b, rec += record) {
      for (int64_t j = 0; j < record; j += 64)
        _mm_prefetch(reinterpret_cast<const char*>(rec + ahead + j), _MM_HINT_T0);
      const uint8_t* xb = xq + b * static_cast<int64_t>(sizeof(BlockQ8_0));
      __m512i qh = _mm512_setzero_si512();  // read only for Q5 (kFive)
      if constexpr (kFive) qh = _mm512_loadu_si512(rec + 32);
      __m512i sum = _mm512_set1_epi32(xcorr[b]);
      for (int g = 0; g < 4; ++g) {
        const __m512i v = _mm512_loadu_si512(rec + nibbles + 64 * g);
        __m512i lo, hi;
        lane_quants<kFive>(v, qh, pick, g, lo, hi);
        sum = _mm512_dpbusd_epi32(sum, lo, _mm512_set1_epi32(load_i32(xb + 2 + 4 * g)));
        sum = _mm512_dpbusd_epi32(sum, hi, _mm512_set1_epi32(load_i32(xb + 2 + 16 + 4 * g)));
      }
      const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec)));
      uint16_t dx;
      std::memcpy(&dx, xb, sizeof(dx));
      acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum),
                            _mm512_mul_ps(dw, _mm512_set1_ps(_cvtsh_ss(dx))), acc);
    }
    const int64_t n = std::min<int64_t>(kGroupRows, r1 - r);
    _mm512_mask_storeu_ps(y + r, static_cast<__mmask16>((1u << n) - 1), acc);
  }
}

}  // namespace

void matvec_q4_0(const MatmulWeights& w, const uint8_t* xq, const int32_t* xcorr, int64_t r0,
                 int64_t r1, float* y) {
  if (w.groups && r0 % kGroupRows == 0) return matvec_groups<false>(w, xq, xcorr, r0, r1, y);
  matvec16<false>(w, xq, xcorr, r0, r1, y);
}

#if defined(CHANNEL_SIMD_BITALG)
void matvec_q5_0(const MatmulWeights& w, const uint8_t* xq, const int32_t* xcorr, int64_t r0,
                 int64_t r1, float* y) {
  if (w.groups && r0 % kGroupRows == 0) return matvec_groups<true>(w, xq, xcorr, r0, r1, y);
  matvec16<true>(w, xq, xcorr, r0, r1, y);
}
#endif

}  // namespace channel::cpu::avx512

#endif  // CHANNEL_SIMD_VNNI
