// AVX-512 matmul loops. Decode (few tokens): 4 weight rows at a time share each activation
// load and stream straight from the mapping (Q8_0, Q4_0, Q5_0: 16 rows in the lanes,
// quant_matvec.h).
// Prompt (many tokens):
//   Q8_0/Q4_0/Q5_0: 32-row panels are repacked once into a lanes-are-rows layout, then a register
//              tile of 32 rows x T tokens: per 32-element block, 8 steps of vpdpbusd(u8
//              weights + zero point, broadcast 4 int8 activations), then one f32 FMA with
//              d_w * d_x;
//   Q2_K..Q6_K: kquant_gemm_avx512.cpp, the same idea with per-group scales;
//   F32/F16/BF16: float_gemm_avx512.cpp, in which every output is the decode loop's 16-lane
//              FMA chain over the columns and the same horizontal sum.
// Either way a token's outputs are the same bits alone, in a small batch or in a prompt.
#include "backend/cpu/matmul_kernels.h"

#if defined(CHANNEL_SIMD_VNNI)

#include "backend/cpu/simd.h"
#include "backend/cpu/thread_scratch.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "backend/cpu/float_gemm.h"
#include "backend/cpu/kquant_gemm.h"
#include "backend/cpu/quant_groups.h"
#include "backend/cpu/quant_kernels.h"
#include "backend/cpu/quant_matvec.h"
#include "backend/cpu/vec_kernels_isa.h"
#include "ops/fp16.h"
#include "ops/quant.h"

namespace channel::cpu::avx512 {
namespace {

// Fewer tokens than this: the streaming matvec loops. Repacking a quantized panel costs
// about as much as 4 row-dot passes over it; the float tile repacks nothing.
constexpr int64_t kQuantGemmMinTokens = 4;
constexpr int64_t kFloatGemmMinTokens = 2;
// K-quants: repacking a panel costs about what 8 tokens of row dots do (kquant_gemm.h).
constexpr int64_t kKQuantGemmMinTokens = 8;
constexpr int kPanelRows = 32;                   // rows of a repacked panel (two 16-lane halves)
constexpr size_t kQuantBlockBytes = 8 * 2 * 64;  // packed block: [group 8][half 2][16 rows][4]
constexpr int kQuantTileTokens = 4;

// The block types with Q8_0 activations that these loops handle (the others: quant_kernels.h).
bool is_quant(GgmlType t) {
  return t == GgmlType::Q8_0 || t == GgmlType::Q4_0 || t == GgmlType::Q5_0;
}

// Weight formats of the int8 loops: block bytes and where the quants start.
enum class QuantKind { q8_0, q4_0, q5_0 };

template <QuantKind K>
constexpr int64_t block_bytes() {
  return K == QuantKind::q8_0 ? 34 : K == QuantKind::q4_0 ? 18 : 22;
}

// The 32 quants of a block as u8 with the type's zero point added (Q8_0: q + 128; Q4_0:
// the nibble; Q5_0: the nibble with its fifth bit, 0..31).
template <QuantKind K>
__m256i unsigned_quants(const uint8_t* block) {
  if constexpr (K == QuantKind::q8_0) {
    return _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2)),
                            _mm256_set1_epi8(static_cast<char>(0x80)));
  } else {
    const __m128i q =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + (K == QuantKind::q4_0 ? 2 : 6)));
    const __m256i nib =
        _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0f));
    if constexpr (K == QuantKind::q4_0) {
      return nib;
    } else {
      uint32_t qh;
      std::memcpy(&qh, block + 2, sizeof(qh));
      return _mm256_or_si256(nib, _mm256_and_si256(_mm256_movm_epi8(qh), _mm256_set1_epi8(0x10)));
    }
  }
}

bool use_gemm(GgmlType t, int64_t n) {
  return n >= (is_quant(t) ? kQuantGemmMinTokens : kFloatGemmMinTokens);
}

using simd::f16_at;

__m256i load256(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}


// The repacked panels of this file's GEMM (thread_scratch.h).
struct QuantPanels;
uint8_t* thread_scratch(size_t bytes) {
  return cpu::thread_scratch<QuantPanels>(bytes);
}

// ---- decode: streaming matvec, 4 rows at a time --------------------------------------------

// Rows rows[0..3] (pointers may repeat) times one token, in lanes 0..3 of the result. Each
// lane does exactly what a lane of quant_tile does — per block, the exact integer dot,
// converted to f32, times (d_w * d_x), fused into the running sum in block order — so a
// token's outputs are bit-identical whether it is decoded alone or batched in a prompt.
// As in the tile, the weights are taken unsigned (w + zero point) and the token's block
// correction xcorr (-zero point * sum q) restores the signed dot: vpdpbusd takes them as
// they are, with no abs/sign per row. next: the 4 rows after these, or null (matvec_token).
template <QuantKind K>
__m128 dot4_quant(const uint8_t* const rows[4], const uint8_t* xq, const int32_t* xcorr,
                  int64_t nb, const uint8_t* next) {
  constexpr int64_t kBlock = block_bytes<K>();
  __m128 acc = _mm_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* xb = xq + b * sizeof(BlockQ8_0);
    const __m256i qx = load256(xb + 2);
    __m256i p[4];
    uint16_t d[4];
    if (next)
      for (int64_t j = 0; j < 4 * kBlock; j += 64)
        simd::prefetch_rows(next + 4 * b * kBlock + j);
    for (int i = 0; i < 4; ++i) {
      const uint8_t* wb = rows[i] + b * kBlock;
      p[i] = _mm256_dpbusd_epi32(_mm256_setzero_si256(), unsigned_quants<K>(wb), qx);
      std::memcpy(&d[i], wb, sizeof(uint16_t));
    }
    // Integer sums (exact in any order): lane i = row i.
    const __m256i h =
        _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
    const __m128i sums =
        _mm_add_epi32(_mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)),
                      _mm_set1_epi32(xcorr[b]));
    const __m128 dw = _mm_cvtph_ps(
        _mm_setr_epi16(static_cast<int16_t>(d[0]), static_cast<int16_t>(d[1]),
                       static_cast<int16_t>(d[2]), static_cast<int16_t>(d[3]), 0, 0, 0, 0));
    acc = _mm_fmadd_ps(_mm_cvtepi32_ps(sums), _mm_mul_ps(dw, _mm_set1_ps(f16_at(xb))), acc);
  }
  return acc;
}

// The sum of the 16 lanes in GCC's _mm512_reduce_add_ps order (the upper 256 bits onto the
// lower, the upper 128 onto the lower, elements 2-3 onto 0-1, element 1 onto 0), written
// out so that every compiler keeps it: the float GEMM's reduce8 (float_gemm_avx512.cpp)
// takes 8 such sums at once with the same additions.
inline float reduce_add_fixed(__m512 a) {
  const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1));
  const __m256 t3 = _mm256_add_ps(hi, _mm512_castps512_ps256(a));
  const __m128 t6 = _mm_add_ps(_mm256_extractf128_ps(t3, 1), _mm256_castps256_ps128(t3));
  const __m128 t8 = _mm_add_ps(t6, _mm_movehl_ps(t6, t6));
  return _mm_cvtss_f32(_mm_add_ss(t8, _mm_movehdup_ps(t8)));
}

// Rows rows[0..3] (pointers may repeat) times one token x [n]: out[r] = the 16-lane FMA
// chain over the columns (masked tail) then reduce_add_fixed. float_gemm_rows does exactly
// this per (row, token), so float outputs do not depend on the batch either.
template <typename W, typename Load, typename LoadMasked>
void dot4_float(const W* const rows[4], const float* x, int64_t n, float* out, Load load,
                LoadMasked load_masked, const uint8_t* next) {
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                   _mm512_setzero_ps()};
  int64_t i = 0;
  constexpr int64_t kStep = 4 * 16 * static_cast<int64_t>(sizeof(W));  // bytes of 4 rows a step
  for (; i + 16 <= n; i += 16) {
    const __m512 xv = _mm512_loadu_ps(x + i);
    if (next)
      for (int64_t j = 0; j < kStep; j += 64)
        simd::prefetch_rows(next + 4 * i * sizeof(W) + j);
    for (int r = 0; r < 4; ++r) acc[r] = _mm512_fmadd_ps(load(rows[r] + i), xv, acc[r]);
  }
  if (i < n) {
    const __mmask16 m = simd::lane_mask16<int64_t>(n - i);
    const __m512 xv = _mm512_maskz_loadu_ps(m, x + i);
    for (int r = 0; r < 4; ++r) acc[r] = _mm512_fmadd_ps(load_masked(rows[r] + i, m), xv, acc[r]);
  }
  for (int r = 0; r < 4; ++r) out[r] = reduce_add_fixed(acc[r]);
}

__m512 load_f16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
__m512 load_f16_masked(const uint16_t* p, __mmask16 m) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}
__m512 bf16_to_ps(__m256i h) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
__m512 load_bf16(const uint16_t* p) {
  return bf16_to_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
__m512 load_bf16_masked(const uint16_t* p, __mmask16 m) {
  return bf16_to_ps(_mm256_maskz_loadu_epi16(m, p));
}

__m512 load_f32(const float* p) {
  return _mm512_loadu_ps(p);
}
__m512 load_f32_masked(const float* p, __mmask16 m) {
  return _mm512_maskz_loadu_ps(m, p);
}

// y[t][r] for rows [r0, r1) of one token, 4 rows at a time; the last 1-3 rows repeat the
// last one in the spare lanes, so every row gets the same arithmetic wherever it falls.
void matvec_token(const MatmulWeights& w, const MatmulInput& x, int64_t t, int64_t r0, int64_t r1,
                  float* y) {
  const int64_t nb = w.cols / kQK;
  const uint8_t* xq = x.xq ? x.xq + t * nb * static_cast<int64_t>(sizeof(BlockQ8_0)) : nullptr;
  const int32_t* xcorr = x.xcorr ? x.xcorr + t * nb : nullptr;
  if (w.type == GgmlType::Q8_0) return matvec_q8_0(w, xq, xcorr, r0, r1, y);  // 16 rows a step
  if (w.type == GgmlType::Q4_0) return matvec_q4_0(w, xq, xcorr, r0, r1, y);
#if defined(CHANNEL_SIMD_BITALG)
  if (w.type == GgmlType::Q5_0) return matvec_q5_0(w, xq, xcorr, r0, r1, y);
#endif
  const float* xf = x.xf ? x.xf + t * w.cols : nullptr;
  for (int64_t r = r0; r < r1; r += 4) {
    const uint8_t* rows[4];
    for (int i = 0; i < 4; ++i)
      rows[i] = w.data + static_cast<size_t>(std::min(r + i, r1 - 1)) * w.row_bytes;
    // The next 4 rows (adjacent in memory) are prefetched while these are read, a block's
    // (a step's) share at a time: rows are short (1-8 KiB), so a distance inside each row
    // lands in the rows being read, and 4 interleaved streams defeat the hardware prefetcher.
    const uint8_t* next = r + 4 < r1 ? rows[0] + 4 * w.row_bytes : nullptr;
    alignas(16) float out[4];
    switch (w.type) {
      case GgmlType::Q5_0:
        _mm_store_ps(out, dot4_quant<QuantKind::q5_0>(rows, xq, xcorr, nb, next));
        break;
      case GgmlType::F16:
      case GgmlType::BF16: {
        const uint16_t* r16[4];
        for (int i = 0; i < 4; ++i) r16[i] = reinterpret_cast<const uint16_t*>(rows[i]);
        if (w.type == GgmlType::F16) {
          dot4_float(r16, xf, w.cols, out, load_f16, load_f16_masked, next);
        } else {
          dot4_float(r16, xf, w.cols, out, load_bf16, load_bf16_masked, next);
        }
        break;
      }
      case GgmlType::F32: {
        const float* r32[4];
        for (int i = 0; i < 4; ++i) r32[i] = reinterpret_cast<const float*>(rows[i]);
        dot4_float(r32, xf, w.cols, out, load_f32, load_f32_masked, next);
        break;
      }
      default:  // other block types go through dot_rows
        return;
    }
    for (int i = 0; i < 4 && r + i < r1; ++i) y[r + i] = out[i];
  }
}

void matvec_rows(const MatmulWeights& w, const MatmulInput& x, int64_t r0, int64_t r1, float* y,
                 int64_t y_stride) {
  // With several tokens, 16-row blocks stay in L1 while every token passes over them.
  const int64_t step = x.n == 1 ? r1 - r0 : 16;
  for (int64_t rb = r0; rb < r1; rb += step) {
    const int64_t re = std::min(rb + step, r1);
    for (int64_t t = 0; t < x.n; ++t) matvec_token(w, x, t, rb, re, y + t * y_stride);
  }
}

// ---- prompt: int8 GEMM on repacked Q8_0 / Q4_0 panels ---------------------------------------

// Index vectors for transpose_16x8 (vpermt2d: bit 4 picks the second source).
struct TransposeIndex {
  __m512i s1[2], s2[2], s3[2];
  TransposeIndex() {
    alignas(64) int32_t i1[2][16], i2[2][16], i3[2][16];
    for (int half = 0; half < 2; ++half) {
      for (int lane = 0; lane < 16; ++lane) {
        // Stage 1: 2+2 rows x 8 dwords -> 4 rows x 4 dwords, lane = dword * 4 + row.
        const int g1 = lane / 4 + 4 * half, r1 = lane % 4;
        i1[half][lane] = r1 < 2 ? r1 * 8 + g1 : 16 + (r1 - 2) * 8 + g1;
        // Stage 2: 4+4 rows x 4 dwords -> 8 rows x 2 dwords, lane = dword * 8 + row.
        const int g2 = lane / 8 + 2 * half, r2 = lane % 8;
        i2[half][lane] = r2 < 4 ? g2 * 4 + r2 : 16 + g2 * 4 + (r2 - 4);
        // Stage 3: 8+8 rows x 2 dwords -> 16 rows of one dword, lane = row.
        i3[half][lane] = lane < 8 ? half * 8 + lane : 16 + half * 8 + (lane - 8);
      }
      s1[half] = _mm512_load_si512(i1[half]);
      s2[half] = _mm512_load_si512(i2[half]);
      s3[half] = _mm512_load_si512(i3[half]);
    }
  }
};

// out[g] lane r = dword g of rows[r]: 16 rows of 8 dwords to 8 vectors of 16, in 24 vpermt2d.
void transpose_16x8(const __m256i rows[16], __m512i out[8]) {
  static const TransposeIndex ix;
  __m512i z[8];  // [row pair] rows 2i, 2i+1
  for (int i = 0; i < 8; ++i) {
    z[i] = _mm512_inserti64x4(_mm512_castsi256_si512(rows[2 * i]), rows[2 * i + 1], 1);
  }
  __m512i a[4][2];  // [row quad][dword half]
  for (int k = 0; k < 4; ++k) {
    for (int h = 0; h < 2; ++h)
      a[k][h] = _mm512_permutex2var_epi32(z[2 * k], ix.s1[h], z[2 * k + 1]);
  }
  __m512i b[2][4];  // [row octet][dword pair]
  for (int o = 0; o < 2; ++o) {
    for (int gp = 0; gp < 4; ++gp) {
      b[o][gp] = _mm512_permutex2var_epi32(a[2 * o][gp / 2], ix.s2[gp % 2], a[2 * o + 1][gp / 2]);
    }
  }
  for (int gp = 0; gp < 4; ++gp) {
    for (int h = 0; h < 2; ++h)
      out[2 * gp + h] = _mm512_permutex2var_epi32(b[0][gp], ix.s3[h], b[1][gp]);
  }
}

// Packs `valid` rows from row0 into [nb][group 8][half 2][16 rows][4 bytes] unsigned weights
// (unsigned_quants) and scales [nb][half 2][16] f32.
template <QuantKind K>
void pack_quant_panel(const MatmulWeights& w, int64_t row0, int valid, uint8_t* packed,
                      float* scales) {
  constexpr int64_t kBlock = block_bytes<K>();
  const int64_t nb = w.cols / kQK;
  const __m512i index =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(static_cast<int>(w.row_bytes)));
  for (int h = 0; h < 2; ++h) {
    const int rows_here = std::clamp(valid - 16 * h, 0, 16);
    const __mmask16 m = simd::lane_mask16<int64_t>(rows_here);
    const uint8_t* base =
        rows_here > 0 ? w.data + static_cast<size_t>(row0 + 16 * h) * w.row_bytes : nullptr;
    for (int64_t b = 0; b < nb; ++b) {
      __m256i rows[16];  // the 32 quants of each row, as u8 with the zero point added
      for (int r = 0; r < 16; ++r) {
        if (r >= rows_here) {
          rows[r] = _mm256_setzero_si256();
          continue;
        }
        rows[r] = unsigned_quants<K>(base + static_cast<size_t>(r) * w.row_bytes + b * kBlock);
      }
      __m512i groups[8];
      transpose_16x8(rows, groups);
      for (int g = 0; g < 8; ++g) {
        _mm512_store_si512(packed + b * kQuantBlockBytes + g * 128 + h * 64, groups[g]);
      }
      __m512 d = _mm512_setzero_ps();
      if (m != 0) {
        const __m512i bits =
            _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, index, base + b * kBlock, 1);
        d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(bits));
      }
      _mm512_store_ps(scales + b * 32 + h * 16, d);
    }
  }
}

// pack_quant_panel<q4_0> (kFive false) or <q5_0> from 16-row groups (quant_groups.h): part g
// of a record is dword g of the 16 rows' nibble bytes, so its low nibbles are the panel's
// group g (elements 4g..4g+3) and its high nibbles group 4 + g (Q5_0: each with its fifth
// bits from the record's, as the decode takes them); the scales are loaded instead of
// gathered. Rows past `valid` are zero, as the row-major packing leaves them.
template <bool kFive>
void pack_panel_from_groups(const MatmulWeights& w, int64_t row0, int valid, uint8_t* packed,
                            float* scales) {
  constexpr GgmlType kType = kFive ? GgmlType::Q5_0 : GgmlType::Q4_0;
  const int64_t record = group_record_bytes(kType), nibbles = group_nibbles_at(kType);
  const int64_t nb = w.cols / kQK;
  __m512i pick[2][4];  // Q5_0: fifth_bit_picks (quant_matvec.h)
  if constexpr (kFive) fifth_bit_picks(pick);
  for (int h = 0; h < 2; ++h) {
    const int rows_here = std::clamp(valid - 16 * h, 0, 16);
    const __mmask16 m = simd::lane_mask16<int64_t>(rows_here);
    const uint8_t* rec =
        rows_here > 0 ? w.groups + ((row0 + 16 * h) / kGroupRows) * nb * record : nullptr;
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* pb = packed + b * kQuantBlockBytes + h * 64;
      __m512 d = _mm512_setzero_ps();
      if (m == 0) {
        for (int g = 0; g < 8; ++g) _mm512_store_si512(pb + g * 128, _mm512_setzero_si512());
      } else {
        const uint8_t* r = rec + b * record;
        __m512i qh = _mm512_setzero_si512();  // read only for Q5 (kFive)
        if constexpr (kFive) qh = _mm512_maskz_loadu_epi32(m, r + 32);
        for (int g = 0; g < 4; ++g) {
          const __m512i v = _mm512_maskz_loadu_epi32(m, r + nibbles + 64 * g);
          __m512i lo, hi;
          lane_quants<kFive>(v, qh, pick, g, lo, hi);
          _mm512_store_si512(pb + g * 128, lo);
          _mm512_store_si512(pb + (4 + g) * 128, hi);
        }
        d = _mm512_maskz_mov_ps(
            m, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r))));
      }
      _mm512_store_ps(scales + b * 32 + h * 16, d);
    }
  }
}

template <int T>
void quant_tile(const uint8_t* packed, const float* scales, int64_t nb, const MatmulInput& x,
                int64_t t0, float* y, int64_t y_stride, int64_t row0, int valid) {
  const size_t xq_row_bytes = static_cast<size_t>(nb) * sizeof(BlockQ8_0);
  const uint8_t* xq[T];
  const float* xd[T];
  const int32_t* xc[T];
  __m512 accf[2][T];
  for (int t = 0; t < T; ++t) {
    xq[t] = x.xq + (t0 + t) * xq_row_bytes + 2;
    xd[t] = x.xd + (t0 + t) * nb;
    xc[t] = x.xcorr + (t0 + t) * nb;
    accf[0][t] = accf[1][t] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    __m512i acc[2][T];
    for (int t = 0; t < T; ++t) acc[0][t] = acc[1][t] = _mm512_set1_epi32(xc[t][b]);
    const uint8_t* pb = packed + b * kQuantBlockBytes;
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) {
      const __m512i w0 = _mm512_load_si512(pb + g * 128);
      const __m512i w1 = _mm512_load_si512(pb + g * 128 + 64);
      for (int t = 0; t < T; ++t) {
        int32_t q4;
        std::memcpy(&q4, xq[t] + b * sizeof(BlockQ8_0) + 4 * g, 4);
        const __m512i xv = _mm512_set1_epi32(q4);
        acc[0][t] = _mm512_dpbusd_epi32(acc[0][t], w0, xv);
        acc[1][t] = _mm512_dpbusd_epi32(acc[1][t], w1, xv);
      }
    }
    const __m512 s0 = _mm512_load_ps(scales + b * 32), s1 = _mm512_load_ps(scales + b * 32 + 16);
    for (int t = 0; t < T; ++t) {
      const __m512 dx = _mm512_set1_ps(xd[t][b]);
      accf[0][t] =
          _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[0][t]), _mm512_mul_ps(s0, dx), accf[0][t]);
      accf[1][t] =
          _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[1][t]), _mm512_mul_ps(s1, dx), accf[1][t]);
    }
  }
  for (int h = 0; h < 2; ++h) {
    const __mmask16 m = simd::lane_mask16<int64_t>(valid - 16 * h);
    if (m == 0) continue;
    for (int t = 0; t < T; ++t) {
      _mm512_mask_storeu_ps(y + (t0 + t) * y_stride + row0 + 16 * h, m, accf[h][t]);
    }
  }
}

// The last tile, of `rem` < kQuantTileTokens tokens (none when rem == 0).
template <int T>
void quant_tile_tail(int64_t rem, const uint8_t* packed, const float* scales, int64_t nb,
                     const MatmulInput& x, int64_t t0, float* y, int64_t y_stride, int64_t row0,
                     int valid) {
  if constexpr (T > 0) {
    if (rem == T) return quant_tile<T>(packed, scales, nb, x, t0, y, y_stride, row0, valid);
    quant_tile_tail<T - 1>(rem, packed, scales, nb, x, t0, y, y_stride, row0, valid);
  }
}

void quant_gemm_rows(const MatmulWeights& w, const MatmulInput& x, int64_t r0, int64_t r1, float* y,
                     int64_t y_stride) {
  const int64_t nb = w.cols / kQK;
  uint8_t* scratch = thread_scratch(static_cast<size_t>(nb) * (kQuantBlockBytes + 32 * 4));
  uint8_t* packed = scratch;                                                  // [nb][1024]
  float* scales = reinterpret_cast<float*>(scratch + nb * kQuantBlockBytes);  // [nb][32]
  for (int64_t row0 = r0; row0 < r1; row0 += kPanelRows) {
    const int valid = static_cast<int>(std::min<int64_t>(kPanelRows, r1 - row0));
    if (w.type == GgmlType::Q4_0 && w.groups && row0 % kGroupRows == 0) {
      pack_panel_from_groups<false>(w, row0, valid, packed, scales);
#if defined(CHANNEL_SIMD_BITALG)
    } else if (w.type == GgmlType::Q5_0 && w.groups && row0 % kGroupRows == 0) {
      pack_panel_from_groups<true>(w, row0, valid, packed, scales);
#endif
    } else if (w.type == GgmlType::Q4_0) {
      pack_quant_panel<QuantKind::q4_0>(w, row0, valid, packed, scales);
    } else if (w.type == GgmlType::Q5_0) {
      pack_quant_panel<QuantKind::q5_0>(w, row0, valid, packed, scales);
    } else {
      pack_quant_panel<QuantKind::q8_0>(w, row0, valid, packed, scales);
    }
    int64_t t0 = 0;
    for (; t0 + kQuantTileTokens <= x.n; t0 += kQuantTileTokens) {
      quant_tile<kQuantTileTokens>(packed, scales, nb, x, t0, y, y_stride, row0, valid);
    }
    quant_tile_tail<kQuantTileTokens - 1>(x.n - t0, packed, scales, nb, x, t0, y, y_stride, row0,
                                          valid);
  }
}

// The other block types: the loop over this variant's row dots.
#include "backend/cpu/matmul_dot_rows.h"

}  // namespace

// Q4_0 groups always; Q5_0 groups where the fifth bits can be spread (BITALG).
bool reads_groups(GgmlType type) {
#if defined(CHANNEL_SIMD_BITALG)
  if (type == GgmlType::Q5_0) return true;
#endif
  return type == GgmlType::Q4_0;
}

int64_t matmul_row_granule(GgmlType type, int64_t n) {
  if (is_kquant(type) && n >= kKQuantGemmMinTokens) return kPanelRows;
  if (!is_quant(type) && quant_type_kernels(type)) return dot_row_granule(type, n);
  return use_gemm(type, n) ? kPanelRows : 16;  // the float GEMM groups 32 rows too
}

void matmul_rows(const MatmulWeights& w, const MatmulInput& x, int64_t r0, int64_t r1, float* y,
                 int64_t y_stride) {
  if (is_kquant(w.type) && x.n >= kKQuantGemmMinTokens) {
    kquant_gemm_rows(w, x, r0, r1, y, y_stride);
  } else if (!is_quant(w.type) && quant_type_kernels(w.type)) {  // other types: row dots
    dot_rows(w, x, r0, r1, y, y_stride);
  } else if (!use_gemm(w.type, x.n)) {
    matvec_rows(w, x, r0, r1, y, y_stride);
  } else if (is_quant(w.type)) {
    quant_gemm_rows(w, x, r0, r1, y, y_stride);
  } else {
    float_gemm_rows(w, x, r0, r1, y, y_stride);
  }
}

}  // namespace channel::cpu::avx512

namespace channel::cpu {
const MatmulKernels* matmul_kernels_avx512_variant() {
  static const MatmulKernels v{"avx512", avx512::matmul_row_granule, avx512::matmul_rows,
                               avx512::reads_groups};
  return &v;
}
}  // namespace channel::cpu

#else  // CHANNEL_SIMD_VNNI

namespace channel::cpu {
const MatmulKernels* matmul_kernels_avx512_variant() {
  return nullptr;
}
}  // namespace channel::cpu

#endif  // CHANNEL_SIMD_VNNI
