// AVX-512 prompt GEMM for F32/F16/BF16 weights (float_gemm.h), blocked for the caches.
//
// Every output (row r, token t) is the decode loop's arithmetic (matmul_kernels_avx512.cpp,
// dot4_float): a 16-lane FMA chain over the columns, lane l taking columns l, l + 16, ... in
// order with a masked last step, then the sum of the 16 lanes in one fixed order (reduce8 takes
// 8 rows' sums at once). The blocking only cuts that chain at multiples of 16 columns and parks
// the 16 lanes in memory between the pieces, which changes no rounding, so a token's outputs stay
// the same bits alone or in any batch.
//
// Loops: groups of kGroupRows rows, packed once as panels (below) for all the tokens, x blocks
// of kBlockTokens tokens; per group and block the columns go in chunks of kChunkCols: a tile's
// chunk of weights stays in L1 while the block's (8-row x 3-token) register tiles pass over it,
// and each token's chunk of activations is reused by all the group's rows. Without the chunks
// (the previous loop), every 8-row tile streamed the whole prompt's activations from L3 or
// memory: 14 MB per tile for a 512-token prompt through ffn_down (6912 columns). The last chunk
// sums its chains from the registers; earlier ones park them.
//
// Panels: a tile's 8 rows are interleaved 16 columns at a time ([step][row][16 lanes], the last
// step padded with +0), so a chunk of a tile is one contiguous run that the inner loop walks
// with a single pointer (with eight row pointers GCC ran out of general registers and parked
// them in vector registers: matmul_bench gemm128/f16 went from 136-142 to 153-162 GFLOP/s).
// The padding multiplies +0 by the masked (+0) activations, the decode loop's masked last step
// exactly. F16 and BF16 panels keep the 2-byte weights and the tile converts them as it loads
// them (exact, so the same f32 values): the conversion runs beside the FMAs at almost no cost,
// and the panel is half the bytes to write and to keep in cache, so a chunk can be twice as long.
#include "backend/cpu/float_gemm.h"

#if defined(CHANNEL_SIMD_VNNI)

#include "backend/cpu/simd.h"

#include <algorithm>
#include <memory>

namespace channel::cpu::avx512 {
namespace {

constexpr int kTileRows = 8;  // register tile: 8 rows x 3 tokens, 24 accumulators
constexpr int kTileTokens = 3;
constexpr int kGroupTiles = 4;  // row tiles per group
constexpr int kGroupRows = kTileRows * kGroupTiles;
constexpr int kBlockTiles = 16;  // token tiles per block
constexpr int kBlockTokens = kTileTokens * kBlockTiles;
constexpr int kTileAcc = kTileRows * kTileTokens;
template <GgmlType kType>
constexpr int64_t kElemBytes = kType == GgmlType::F32 ? 4 : 2;  // a panel's weight
// A multiple of 16: chunks cut the FMA chains between lanes. Each chunk parks and reloads the
// tile's 24 accumulators; at 256 columns that cost a quarter of the f16 GEMM's time, and
// 768 x 16 token tiles measured fastest for f32 panels (matmul_bench gemm128/f16, +35 % over
// 256 x 8). A chunk of a tile's panel is 24 KiB of L1 either way: 768 f32 or 1536 2-byte columns.
constexpr int64_t kChunkBytes = 768 * 4 * kTileRows;
template <GgmlType kType>
constexpr int64_t kChunkCols = kChunkBytes / kTileRows / kElemBytes<kType>;

// Per-thread scratch: the group's rows as panels [kGroupTiles][steps][kTileRows][16] of the
// weight's element (f32, or the f16/bf16 bits) and the parked accumulators
// [kGroupTiles][kBlockTiles][kTileAcc] vectors.
struct Scratch {
  std::unique_ptr<uint8_t[]> w;
  size_t w_bytes = 0;
  alignas(64) float acc[kGroupTiles * kBlockTiles * kTileAcc * 16];
  uint8_t* panels(int64_t steps, size_t elem_bytes) {  // 64-byte aligned
    const size_t need = kGroupRows * static_cast<size_t>(steps) * 16 * elem_bytes + 64;
    if (w_bytes < need) {
      w.reset(new uint8_t[need]);
      w_bytes = need;
    }
    const uintptr_t p = reinterpret_cast<uintptr_t>(w.get());
    return w.get() + (64 - p % 64) % 64;
  }
};

Scratch& thread_scratch() {
  thread_local std::unique_ptr<Scratch> s(new Scratch);
  return *s;
}

// The panel's 16 weights of a row and step as f32 (exact conversions).
template <GgmlType kType>
__m512 panel_load(const void* p) {
  if constexpr (kType == GgmlType::F16) {
    return _mm512_cvtph_ps(_mm256_load_si256(static_cast<const __m256i*>(p)));
  } else if constexpr (kType == GgmlType::BF16) {
    const __m256i h = _mm256_load_si256(static_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  } else {
    return _mm512_load_ps(static_cast<const float*>(p));
  }
}

// The horizontal sums of 8 accumulators a[0..7] into y[0 .. rows), each one the bits of
// dot4_float's reduce_add_fixed(a[r]) (GCC's _mm512_reduce_add_ps): the upper 256 bits added to
// the lower, then the upper 128 to the lower, then elements 2-3 to 0-1, then element 1 to 0.
// Here the 8 reductions go through the same steps side by side, two accumulators per register
// (the same operand pairs: addition commutes exactly), about 3 instructions per sum instead of 9.
inline void reduce8(const __m512 (&acc)[kTileRows], float* y, int rows) {
  __m512 s[4], u[2];
  for (int p = 0; p < 4; ++p) {  // [a.lo256 + a.hi256, b.lo256 + b.hi256]
    const __m512 a = acc[2 * p];
    const __m512 b = acc[2 * p + 1];
    s[p] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
  }
  for (int p = 0; p < 2; ++p)  // 128-bit lane L: a[4p + L]'s 128-bit halves added
    u[p] = _mm512_add_ps(_mm512_shuffle_f32x4(s[2 * p], s[2 * p + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(s[2 * p], s[2 * p + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  // Lane L: [a[L] (0 + 2, 1 + 3), a[L + 4] (0 + 2, 1 + 3)].
  const __m512 z = _mm512_add_ps(_mm512_shuffle_ps(u[0], u[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm512_shuffle_ps(u[0], u[1], _MM_SHUFFLE(3, 2, 3, 2)));
  // Element 0 + element 1: lane L element 0 is a[L]'s sum, element 2 is a[L + 4]'s.
  const __m512 r = _mm512_add_ps(z, _mm512_shuffle_ps(z, z, _MM_SHUFFLE(2, 3, 0, 1)));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 2, 6, 10, 14, 0, 0, 0, 0, 0, 0, 0, 0);
  _mm512_mask_storeu_ps(y, static_cast<__mmask16>((1u << rows) - 1),
                        _mm512_permutexvar_ps(order, r));
}

// One chunk of `cols` columns (a multiple of 16 except in the last chunk, whose tail is
// masked exactly as dot4_float masks it) for a tile's panel w ([step][8 rows][16], from the
// chunk's first step) and T tokens x[t] (stride x_stride): the parked accumulators `acc` go on
// from where they stopped (or from zero when `first`). When y is set this is the rows' last
// chunk: every chain is complete, and the tile writes the horizontal sums (dot4_float's bits)
// of token t to y + t * y_stride, `rows` of them, instead of parking the accumulators.
template <GgmlType kType, int T>
void tile_chunk(const uint8_t* w, const float* x, int64_t x_stride, int64_t cols, bool first,
                float* acc, float* y, int64_t y_stride, int rows) {
  constexpr int64_t kRowBytes = 16 * kElemBytes<kType>;  // one row's 16 weights of a step
  __m512 a[kTileRows][T];
  for (int r = 0; r < kTileRows; ++r) {
    for (int t = 0; t < T; ++t)
      a[r][t] = first ? _mm512_setzero_ps() : _mm512_load_ps(acc + (r * kTileTokens + t) * 16);
  }
  int64_t i = 0;
  for (; i + 16 <= cols; i += 16, w += kTileRows * kRowBytes) {
    __m512 xv[T];
    for (int t = 0; t < T; ++t) xv[t] = _mm512_loadu_ps(x + t * x_stride + i);
    for (int r = 0; r < kTileRows; ++r) {
      __m512 wv = panel_load<kType>(w + r * kRowBytes);
      // Left alone, GCC folds this load into each of the T FMAs as a memory operand: 3 x
      // loads + 24 weight loads per 24 FMAs, which makes the loop bound by the load ports
      // (two 512-bit loads per cycle against two FMAs). In a register: 11 loads.
      __asm__("" : "+v"(wv));
      for (int t = 0; t < T; ++t) a[r][t] = _mm512_fmadd_ps(wv, xv[t], a[r][t]);
    }
  }
  if (i < cols) {  // the panel's padded lanes are +0, the activations' are masked to +0
    const __mmask16 m = simd::lane_mask16(cols - i);
    __m512 xv[T];
    for (int t = 0; t < T; ++t) xv[t] = _mm512_maskz_loadu_ps(m, x + t * x_stride + i);
    for (int r = 0; r < kTileRows; ++r) {
      const __m512 wv = panel_load<kType>(w + r * kRowBytes);
      for (int t = 0; t < T; ++t) a[r][t] = _mm512_fmadd_ps(wv, xv[t], a[r][t]);
    }
  }
  if (y) {
    for (int t = 0; t < T; ++t) {
      const __m512 chains[kTileRows] = {a[0][t], a[1][t], a[2][t], a[3][t],
                                        a[4][t], a[5][t], a[6][t], a[7][t]};
      reduce8(chains, y + t * y_stride, rows);
    }
    return;
  }
  for (int r = 0; r < kTileRows; ++r) {
    for (int t = 0; t < T; ++t) _mm512_store_ps(acc + (r * kTileTokens + t) * 16, a[r][t]);
  }
}

// Rows src[0..7] (cols weights of kType) into a tile's panel (steps x [8 rows][16]), written
// in order: step by step, the eight rows' 16 columns side by side, the bits unchanged.
template <GgmlType kType>
void pack_tile(const uint8_t* const src[kTileRows], int64_t cols, uint8_t* panel) {
  for (int64_t i = 0; i < cols; i += 16) {
    const __mmask16 m =
        i + 16 <= cols ? static_cast<__mmask16>(0xFFFF) : simd::lane_mask16(cols - i);
    for (int r = 0; r < kTileRows; ++r, panel += 16 * kElemBytes<kType>) {
      if constexpr (kType == GgmlType::F32) {
        const float* row = reinterpret_cast<const float*>(src[r]);
        _mm512_store_ps(panel, _mm512_maskz_loadu_ps(m, row + i));
      } else {
        const uint16_t* row = reinterpret_cast<const uint16_t*>(src[r]);
        _mm256_store_si256(reinterpret_cast<__m256i*>(panel), _mm256_maskz_loadu_epi16(m, row + i));
      }
    }
  }
}

template <GgmlType kType>
void tile_chunk_n(int nt, const uint8_t* w, const float* x, int64_t x_stride, int64_t cols,
                  bool first, float* acc, float* y, int64_t y_stride, int rows) {
  switch (nt) {
    case 3:
      return tile_chunk<kType, 3>(w, x, x_stride, cols, first, acc, y, y_stride, rows);
    case 2:
      return tile_chunk<kType, 2>(w, x, x_stride, cols, first, acc, y, y_stride, rows);
    default:
      return tile_chunk<kType, 1>(w, x, x_stride, cols, first, acc, y, y_stride, rows);
  }
}

template <GgmlType kType>
void gemm_rows(const MatmulWeights& w, const MatmulInput& x, int64_t r0, int64_t r1, float* y,
               int64_t y_stride) {
  Scratch& s = thread_scratch();
  const int64_t cols = w.cols;
  constexpr int64_t kStepBytes = kTileRows * 16 * kElemBytes<kType>;  // a tile's step
  for (int64_t g0 = r0; g0 < r1; g0 += kGroupRows) {
    const int valid = static_cast<int>(std::min<int64_t>(kGroupRows, r1 - g0));
    const int tiles = (valid + kTileRows - 1) / kTileRows;
    // The group's rows as panels, packed once for every token; rows past `valid`
    // repeat the last one so that every tile computes on real numbers (their outputs are
    // not written).
    const int64_t steps = (cols + 15) / 16;
    uint8_t* panels = s.panels(steps, kElemBytes<kType>);
    for (int i = 0; i < tiles; ++i) {
      const uint8_t* src[kTileRows];
      for (int r = 0; r < kTileRows; ++r) {
        const int64_t row = g0 + std::min(i * kTileRows + r, valid - 1);
        src[r] = w.data + static_cast<size_t>(row) * w.row_bytes;
      }
      pack_tile<kType>(src, cols, panels + i * steps * kStepBytes);
    }
    for (int64_t b0 = 0; b0 < x.n; b0 += kBlockTokens) {
      const int block_tokens = static_cast<int>(std::min<int64_t>(kBlockTokens, x.n - b0));
      const int token_tiles = (block_tokens + kTileTokens - 1) / kTileTokens;
      for (int64_t k0 = 0; k0 < cols; k0 += kChunkCols<kType>) {
        const int64_t kc = std::min<int64_t>(kChunkCols<kType>, cols - k0);
        const bool last = k0 + kc == cols;
        for (int i = 0; i < tiles; ++i) {  // a tile's chunk of weights stays in L1 meanwhile
          const uint8_t* wp = panels + (i * steps + k0 / 16) * kStepBytes;
          const int rows_here = std::min(kTileRows, valid - i * kTileRows);
          for (int j = 0; j < token_tiles; ++j) {
            const int nt = std::min(kTileTokens, block_tokens - j * kTileTokens);
            const float* xs = x.xf + (b0 + j * kTileTokens) * cols + k0;
            float* acc = s.acc + (i * kBlockTiles + j) * kTileAcc * 16;
            float* ys = last ? y + (b0 + j * kTileTokens) * y_stride + g0 + i * kTileRows : nullptr;
            tile_chunk_n<kType>(nt, wp, xs, cols, kc, k0 == 0, acc, ys, y_stride, rows_here);
          }
        }
      }
    }
  }
}

}  // namespace

void float_gemm_rows(const MatmulWeights& w, const MatmulInput& x, int64_t r0, int64_t r1, float* y,
                     int64_t y_stride) {
  switch (w.type) {
    case GgmlType::F16:
      return gemm_rows<GgmlType::F16>(w, x, r0, r1, y, y_stride);
    case GgmlType::BF16:
      return gemm_rows<GgmlType::BF16>(w, x, r0, r1, y, y_stride);
    default:
      return gemm_rows<GgmlType::F32>(w, x, r0, r1, y, y_stride);
  }
}

}  // namespace channel::cpu::avx512

#endif  // CHANNEL_SIMD_VNNI
