// AVX-512 prompt GEMM of the K-quants (kquant_gemm.h).
//
// A panel of 32 weight rows is unpacked once per super-block (quant_kernels_simd.h,
// unpack_k) and repacked so that the lanes of a vector are rows:
//   quants  [64 four-element groups][half 2][16 rows][4] u8 (q + the type's offset),
//   scales  [scale groups][half 2][16 rows] i32 (one per 16 or 32 elements),
//   minimums[8 pairs][half 2][16 rows][2] i16 (types with minimums, one per 16 elements),
//   d, dmin [half 2][16 rows] f32.
// A tile of 32 rows x 4 tokens then takes, per scale group, vpdpbusd of the u8 quants with
// 4 broadcast int8 activations (starting from -offset * the group's activation sum, so the
// integer is that of the signed quants), one vpmulld by the scales into the super-block's
// i32 sum, and per super-block one f32 FMA with d * d_x (and vpdpwssd of the minimums with
// the activation sums, then one FMA with -dmin * d_x). The integer parts are exact, so every
// output has the decode dot's arithmetic and a token gets the same bits in any batch.
#include "backend/cpu/kquant_gemm.h"

#if defined(CHANNEL_SIMD_VNNI)

#include "backend/cpu/simd.h"
#include "backend/cpu/thread_scratch.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <memory>

#include "backend/cpu/quant_kernels.h"
#include "ops/fp16.h"
#include "ops/quant.h"
#include "ops/quant_k.h"
#include "ops/quant_legacy.h"

namespace channel::cpu::avx512 {
namespace {
#include "backend/cpu/quant_kernels_simd.h"

constexpr int kPanelRows = 32;
constexpr int kTileTokens = 4;
constexpr size_t kQuantBytes = 64 * 2 * 64;  // [64 groups][half 2][16 rows][4 bytes]
constexpr size_t kScaleBytes = 16 * 2 * 64;  // up to 16 scale groups
constexpr size_t kMinBytes = 8 * 2 * 64;
constexpr size_t kSuperBytes = kQuantBytes + kScaleBytes + kMinBytes + 2 * 2 * 64;  // + d, dmin
constexpr size_t kScaleAt = kQuantBytes, kMinAt = kScaleAt + kScaleBytes;
constexpr size_t kDAt = kMinAt + kMinBytes, kDminAt = kDAt + 2 * 64;
constexpr size_t kActBytes = sizeof(BlockQ8_K);

// Per K type: its block, elements per scale, the quants' offset and whether it has minimums
// (as unpack_k gives them: Q3_K's scales already minus 32).
template <typename B, int kGroup, int kOff, bool kMin>
struct KType {
  using Block = B;
  static constexpr int kGroupElems = kGroup;
  static constexpr int kOffset = kOff;
  static constexpr bool kHasMin = kMin;
};
using Q2 = KType<BlockQ2_K, 16, 0, true>;
using Q3 = KType<BlockQ3_K, 16, 4, false>;
using Q4 = KType<BlockQ4_K, 32, 0, true>;
using Q5 = KType<BlockQ5_K, 32, 0, true>;
using Q6 = KType<BlockQ6_K, 16, 32, false>;

// The repacked panels of this file's GEMM (thread_scratch.h).
struct KQuantPanels;
uint8_t* thread_scratch(size_t bytes) {
  return cpu::thread_scratch<KQuantPanels>(bytes);
}

// Repacks rows [row0, row0 + valid) into `packed` ([n_sb][kSuperBytes]); rows past `valid`
// are zero (their outputs are not written).
template <typename K>
void pack_panel(const MatmulWeights& w, int64_t row0, int valid, uint8_t* packed) {
  const int64_t n_sb = w.cols / kQK_K;
  // A full panel overwrites every byte the tiles read.
  if (valid < kPanelRows) std::memset(packed, 0, static_cast<size_t>(n_sb) * kSuperBytes);
  constexpr int kGroups = kQK_K / K::kGroupElems;
  for (int r = 0; r < valid; ++r) {
    const int h = r / 16, lane = r % 16;
    const uint8_t* row = w.data + static_cast<size_t>(row0 + r) * w.row_bytes;
    for (int64_t sb = 0; sb < n_sb; ++sb) {
      simd_detail::KUnpacked k;
      simd_detail::unpack_k(reinterpret_cast<const typename K::Block*>(row) + sb, &k);
      alignas(32) uint32_t q[kQK_K / 4];
      alignas(32) int16_t sc[16], m[16];
      for (int c = 0; c < 8; ++c) _mm256_store_si256(reinterpret_cast<__m256i*>(q + 8 * c), k.u[c]);
      _mm256_store_si256(reinterpret_cast<__m256i*>(sc), k.sc);
      _mm256_store_si256(reinterpret_cast<__m256i*>(m), k.m);
      uint8_t* p = packed + sb * kSuperBytes;
      auto* pq = reinterpret_cast<uint32_t*>(p);
      for (int g = 0; g < 64; ++g) pq[(g * 2 + h) * 16 + lane] = q[g];
      auto* ps = reinterpret_cast<int32_t*>(p + kScaleAt);
      for (int g = 0; g < kGroups; ++g) ps[(g * 2 + h) * 16 + lane] = sc[g * K::kGroupElems / 16];
      if constexpr (K::kHasMin) {
        auto* pm = reinterpret_cast<uint32_t*>(p + kMinAt);
        for (int j = 0; j < 8; ++j) {
          pm[(j * 2 + h) * 16 + lane] = static_cast<uint16_t>(m[2 * j]) |
                                        static_cast<uint32_t>(static_cast<uint16_t>(m[2 * j + 1]))
                                            << 16;
        }
      }
      reinterpret_cast<float*>(p + kDAt)[h * 16 + lane] = k.d;
      reinterpret_cast<float*>(p + kDminAt)[h * 16 + lane] = k.dmin;
    }
  }
}

int32_t load_i32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Rows [row0, row0 + valid) of the packed panel times tokens t0 .. t0 + T - 1.
template <typename K, int T>
void tile(const uint8_t* packed, int64_t n_sb, const MatmulInput& x, int64_t t0, float* y,
          int64_t y_stride, int64_t row0, int valid) {
  constexpr int kGroups = kQK_K / K::kGroupElems;
  constexpr int kSteps = K::kGroupElems / 4;
  const uint8_t* xb[T];
  __m512 accf[2][T];
  for (int t = 0; t < T; ++t) {
    xb[t] = x.xq + static_cast<size_t>(t0 + t) * x.xq_row_bytes;
    accf[0][t] = accf[1][t] = _mm512_setzero_ps();
  }
  for (int64_t sb = 0; sb < n_sb; ++sb) {
    const uint8_t* p = packed + sb * kSuperBytes;
    const uint8_t* xs[T];
    for (int t = 0; t < T; ++t) xs[t] = xb[t] + sb * kActBytes;
    __m512i acci[2][T];
    for (int t = 0; t < T; ++t) acci[0][t] = acci[1][t] = _mm512_setzero_si512();
    for (int g = 0; g < kGroups; ++g) {
      __m512i tmp[2][T];
      for (int t = 0; t < T; ++t) {
        if constexpr (K::kOffset != 0) {  // 16-element groups: bsums[g] is the group's sum
          int16_t bs;
          std::memcpy(&bs, xs[t] + offsetof(BlockQ8_K, bsums) + 2 * g, sizeof(bs));
          tmp[0][t] = tmp[1][t] = _mm512_set1_epi32(-K::kOffset * bs);
        } else {
          tmp[0][t] = tmp[1][t] = _mm512_setzero_si512();
        }
      }
#pragma GCC unroll 8
      for (int s = 0; s < kSteps; ++s) {
        const int q4 = g * kSteps + s;  // four-element group
        const __m512i w0 = _mm512_load_si512(p + (q4 * 2) * 64);
        const __m512i w1 = _mm512_load_si512(p + (q4 * 2 + 1) * 64);
        for (int t = 0; t < T; ++t) {
          const __m512i xv = _mm512_set1_epi32(load_i32(xs[t] + offsetof(BlockQ8_K, qs) + 4 * q4));
          tmp[0][t] = _mm512_dpbusd_epi32(tmp[0][t], w0, xv);
          tmp[1][t] = _mm512_dpbusd_epi32(tmp[1][t], w1, xv);
        }
      }
      const __m512i s0 = _mm512_load_si512(p + kScaleAt + (g * 2) * 64);
      const __m512i s1 = _mm512_load_si512(p + kScaleAt + (g * 2 + 1) * 64);
      for (int t = 0; t < T; ++t) {
        acci[0][t] = _mm512_add_epi32(acci[0][t], _mm512_mullo_epi32(tmp[0][t], s0));
        acci[1][t] = _mm512_add_epi32(acci[1][t], _mm512_mullo_epi32(tmp[1][t], s1));
      }
    }
    const __m512 d[2] = {_mm512_load_ps(p + kDAt), _mm512_load_ps(p + kDAt + 64)};
    for (int t = 0; t < T; ++t) {
      float xd;
      std::memcpy(&xd, xs[t] + offsetof(BlockQ8_K, d), sizeof(xd));
      const __m512 vxd = _mm512_set1_ps(xd);
      for (int h = 0; h < 2; ++h)
        accf[h][t] =
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(acci[h][t]), _mm512_mul_ps(d[h], vxd), accf[h][t]);
    }
    if constexpr (K::kHasMin) {
      const __m512 dmin[2] = {_mm512_load_ps(p + kDminAt), _mm512_load_ps(p + kDminAt + 64)};
      for (int t = 0; t < T; ++t) {
        __m512i summ[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
        for (int j = 0; j < 8; ++j) {
          const __m512i bv =
              _mm512_set1_epi32(load_i32(xs[t] + offsetof(BlockQ8_K, bsums) + 4 * j));
          for (int h = 0; h < 2; ++h)
            summ[h] =
                _mm512_dpwssd_epi32(summ[h], _mm512_load_si512(p + kMinAt + (j * 2 + h) * 64), bv);
        }
        float xd;
        std::memcpy(&xd, xs[t] + offsetof(BlockQ8_K, d), sizeof(xd));
        const __m512 vxd = _mm512_set1_ps(xd);
        for (int h = 0; h < 2; ++h)
          accf[h][t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(summ[h]), _mm512_mul_ps(dmin[h], vxd),
                                        accf[h][t]);
      }
    }
  }
  for (int h = 0; h < 2; ++h) {
    const __mmask16 m = simd::lane_mask16(valid - 16 * h);
    if (m == 0) continue;
    for (int t = 0; t < T; ++t)
      _mm512_mask_storeu_ps(y + (t0 + t) * y_stride + row0 + 16 * h, m, accf[h][t]);
  }
}

template <typename K>
void gemm_rows(const MatmulWeights& w, const MatmulInput& x, int64_t r0, int64_t r1, float* y,
               int64_t y_stride) {
  const int64_t n_sb = w.cols / kQK_K;
  uint8_t* packed = thread_scratch(static_cast<size_t>(n_sb) * kSuperBytes);
  for (int64_t row0 = r0; row0 < r1; row0 += kPanelRows) {
    const int valid = static_cast<int>(std::min<int64_t>(kPanelRows, r1 - row0));
    pack_panel<K>(w, row0, valid, packed);
    int64_t t0 = 0;
    for (; t0 + kTileTokens <= x.n; t0 += kTileTokens)
      tile<K, kTileTokens>(packed, n_sb, x, t0, y, y_stride, row0, valid);
    switch (x.n - t0) {
      case 3:
        tile<K, 3>(packed, n_sb, x, t0, y, y_stride, row0, valid);
        break;
      case 2:
        tile<K, 2>(packed, n_sb, x, t0, y, y_stride, row0, valid);
        break;
      case 1:
        tile<K, 1>(packed, n_sb, x, t0, y, y_stride, row0, valid);
        break;
      default:
        break;
    }
  }
}

}  // namespace

bool is_kquant(GgmlType type) {
  switch (type) {
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
      return true;
    default:
      return false;
  }
}

void kquant_gemm_rows(const MatmulWeights& w, const MatmulInput& x, int64_t r0, int64_t r1,
                      float* y, int64_t y_stride) {
  switch (w.type) {
    case GgmlType::Q2_K:
      return gemm_rows<Q2>(w, x, r0, r1, y, y_stride);
    case GgmlType::Q3_K:
      return gemm_rows<Q3>(w, x, r0, r1, y, y_stride);
    case GgmlType::Q4_K:
      return gemm_rows<Q4>(w, x, r0, r1, y, y_stride);
    case GgmlType::Q5_K:
      return gemm_rows<Q5>(w, x, r0, r1, y, y_stride);
    case GgmlType::Q6_K:
      return gemm_rows<Q6>(w, x, r0, r1, y, y_stride);
    default:
      return;
  }
}

}  // namespace channel::cpu::avx512

#endif  // CHANNEL_SIMD_VNNI
