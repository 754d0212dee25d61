// Weight repacking, activation input forms, and the products y = x . W^T for F32, F16, BF16,
// Q8_0, Q4_0, the K-quants Q2_K..Q6_K and Q4_1/Q5_0/Q5_1 (see cuda_kernels.h for the
// layouts). One token: a warp per output row (v0) or per one to four rows with a chunk's loads
// issued together (v1..v5, cuda_kernels.h) streams the row with 16-byte loads, integer dp4a
// dots for Q8_0/Q4_0; rows of the file's blocks (K-quants, Q4_1/Q5_0/Q5_1) are dequantized 16
// elements at a time (kquant_group.h) against f32 activations. Several tokens: 128 x 64 tiles on
// the tensor cores (wmma, f16 or bf16 inputs, f32 accumulation), weights dequantized into shared
// memory.
#include <mma.h>

#include <map>
#include <mutex>

#include <type_traits>

#include "backend/cuda/cuda_bulk_copy.cuh"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_cublas.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/kquant_group.h"
#include "util/error.h"

namespace channel::cuda {

namespace {

constexpr int kQ = 32;  // elements per Q8_0 / Q4_0 block

// ---- repacking ------------------------------------------------------------------------------

// One thread per block: raw [nb] blocks of (f16 d, payload) -> q [nb][payload], d [nb].
template <int Payload>
__global__ void repack_blocks_kernel(const uint8_t* raw, int64_t n_blocks, uint8_t* q,
                                     uint16_t* d) {
  const int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= n_blocks) return;
  const uint8_t* src = raw + b * (2 + Payload);
  d[b] = static_cast<uint16_t>(src[0] | (src[1] << 8));
  uint8_t* dst = q + b * Payload;
#pragma unroll
  for (int i = 0; i < Payload; ++i) dst[i] = src[2 + i];
}

// ---- activation input forms -----------------------------------------------------------------

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __half from_float<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

template <typename T>
__global__ void convert_kernel(const float* x, int64_t cols, int64_t ldx, T* out) {
  pdl_wait();
  const int64_t t = blockIdx.y;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < cols;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[t * cols + i] = from_float<T>(x[t * ldx + i]);
}

// A warp per 32-element block: the CPU's Q8_0 activation arithmetic (ops/quant.h), with
// quant_store's NaN scale for a block that holds a NaN or an Inf (cuda_common.cuh).
__global__ void quantize_q8_kernel(const float* x, int64_t n, int64_t cols, int64_t ldx,
                                   int8_t* q, float* d) {
  pdl_wait();
  const int64_t nb = cols / kQ;
  const int64_t blk = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (blk >= n * nb) return;
  const int64_t t = blk / nb, b = blk % nb;
  // Element t * cols + b * kQ + lane: its block's scale lands in d[blk].
  quant_store(x[t * ldx + b * kQ + threadIdx.x % 32], t * cols + b * kQ + threadIdx.x % 32, q, d);
}

// ---- one token per block row: the matvec ------------------------------------------------------

enum Kind { kF32, kF16, kBF16, kQ8, kQ4, kF32s, kF16s, kBF16s, kKq };

__device__ __forceinline__ int dot16_i8(int4 a, int4 b, int acc) {
  acc = __dp4a(a.x, b.x, acc);
  acc = __dp4a(a.y, b.y, acc);
  acc = __dp4a(a.z, b.z, acc);
  return __dp4a(a.w, b.w, acc);
}

__device__ __forceinline__ float2 widen2(__half2 h) {
  return __half22float2(h);
}
__device__ __forceinline__ float2 widen2(__nv_bfloat162 h) {
  return __bfloat1622float2(h);
}

// The 8 products of two int4s of packed 16-bit floats summed in f32, in a fixed order: f16
// pairs for K == kF16, bf16 pairs otherwise.
template <int K>
__device__ __forceinline__ float dot8_16(int4 a, int4 b) {
  using Pair = std::conditional_t<K == kF16, __half2, __nv_bfloat162>;
  const Pair* ha = reinterpret_cast<const Pair*>(&a);
  const Pair* hb = reinterpret_cast<const Pair*>(&b);
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 fa = widen2(ha[i]), fb = widen2(hb[i]);
    s = fmaf(fa.x, fb.x, s);
    s = fmaf(fa.y, fb.y, s);
  }
  return s;
}

__device__ __forceinline__ float dot4_f(float4 a, float4 b) {
  return fmaf(a.x, b.x, fmaf(a.y, b.y, fmaf(a.z, b.z, a.w * b.w)));
}

// Lane's share of row r . token t. Vector kinds need cols to be a multiple of their width.
template <int K>
__device__ __forceinline__ float row_dot(const DevMatrix& w, const void* act, int64_t r, int64_t t,
                                         int64_t cols, int64_t n, int lane) {
  float sum = 0.0f;
  if constexpr (K == kQ8) {
    const int8_t* wq = static_cast<const int8_t*>(w.q) + r * cols;
    const __half* wd = static_cast<const __half*>(w.d) + r * (cols / kQ);
    const int8_t* xq = static_cast<const int8_t*>(act) + t * cols;
    const float* xd = reinterpret_cast<const float*>(static_cast<const int8_t*>(act) + n * cols) +
                      t * (cols / kQ);
    constexpr int64_t step = 32 * 16;
    int64_t e = lane * 16;
    for (; e + 3 * step < cols; e += 4 * step) {
      int4 a[4], b[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        a[u] = __ldg(reinterpret_cast<const int4*>(wq + e + u * step));
        b[u] = *reinterpret_cast<const int4*>(xq + e + u * step);
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int64_t blk = (e + u * step) / kQ;
        sum += static_cast<float>(dot16_i8(a[u], b[u], 0)) * (__half2float(wd[blk]) * xd[blk]);
      }
    }
    for (; e < cols; e += step) {
      const int4 a = __ldg(reinterpret_cast<const int4*>(wq + e));
      const int4 b = *reinterpret_cast<const int4*>(xq + e);
      sum += static_cast<float>(dot16_i8(a, b, 0)) * (__half2float(wd[e / kQ]) * xd[e / kQ]);
    }
  } else if constexpr (K == kQ4) {
    const int64_t nb = cols / kQ;
    const uint8_t* wq = static_cast<const uint8_t*>(w.q) + r * nb * 16;
    const __half* wd = static_cast<const __half*>(w.d) + r * nb;
    const int8_t* xq = static_cast<const int8_t*>(act) + t * cols;
    const float* xd =
        reinterpret_cast<const float*>(static_cast<const int8_t*>(act) + n * cols) + t * nb;
    auto block = [&](int4 wv, int4 x0, int4 x1, int64_t b) {
      int isum = 0;
      isum = __dp4a(wv.x & 0x0f0f0f0f, x0.x, isum);
      isum = __dp4a(wv.y & 0x0f0f0f0f, x0.y, isum);
      isum = __dp4a(wv.z & 0x0f0f0f0f, x0.z, isum);
      isum = __dp4a(wv.w & 0x0f0f0f0f, x0.w, isum);
      isum = __dp4a((wv.x >> 4) & 0x0f0f0f0f, x1.x, isum);
      isum = __dp4a((wv.y >> 4) & 0x0f0f0f0f, x1.y, isum);
      isum = __dp4a((wv.z >> 4) & 0x0f0f0f0f, x1.z, isum);
      isum = __dp4a((wv.w >> 4) & 0x0f0f0f0f, x1.w, isum);
      const int xs = dot16_i8(make_int4(0x01010101, 0x01010101, 0x01010101, 0x01010101), x0,
                              dot16_i8(make_int4(0x01010101, 0x01010101, 0x01010101, 0x01010101),
                                       x1, 0));
      return static_cast<float>(isum - 8 * xs) * (__half2float(wd[b]) * xd[b]);
    };
    int64_t b = lane;
    for (; b + 96 < nb; b += 128) {
      int4 wv[4], x0[4], x1[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        wv[u] = __ldg(reinterpret_cast<const int4*>(wq + (b + 32 * u) * 16));
        x0[u] = *reinterpret_cast<const int4*>(xq + (b + 32 * u) * kQ);
        x1[u] = *reinterpret_cast<const int4*>(xq + (b + 32 * u) * kQ + 16);
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) sum += block(wv[u], x0[u], x1[u], b + 32 * u);
    }
    for (; b < nb; b += 32) {
      const int4 wv = __ldg(reinterpret_cast<const int4*>(wq + b * 16));
      sum += block(wv, *reinterpret_cast<const int4*>(xq + b * kQ),
                   *reinterpret_cast<const int4*>(xq + b * kQ + 16), b);
    }
  } else if constexpr (K == kF16 || K == kBF16) {
    const uint16_t* wr = static_cast<const uint16_t*>(w.q) + r * cols;
    const uint16_t* xr = static_cast<const uint16_t*>(act) + t * cols;
    constexpr int64_t step = 32 * 8;
    int64_t e = lane * 8;
    for (; e + 3 * step < cols; e += 4 * step) {
      int4 a[4], b[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        a[u] = __ldg(reinterpret_cast<const int4*>(wr + e + u * step));
        b[u] = *reinterpret_cast<const int4*>(xr + e + u * step);
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) sum += dot8_16<K>(a[u], b[u]);
    }
    for (; e < cols; e += step) {
      const int4 a = __ldg(reinterpret_cast<const int4*>(wr + e));
      const int4 b = *reinterpret_cast<const int4*>(xr + e);
      sum += dot8_16<K>(a, b);
    }
  } else if constexpr (K == kF32) {
    const float* wr = static_cast<const float*>(w.q) + r * cols;
    const float* xr = static_cast<const float*>(act) + t * cols;
    for (int64_t e = lane * 4; e < cols; e += 32 * 4)
      sum += dot4_f(__ldg(reinterpret_cast<const float4*>(wr + e)),
                    *reinterpret_cast<const float4*>(xr + e));
  } else if constexpr (K == kF32s) {
    const float* wr = static_cast<const float*>(w.q) + r * cols;
    const float* xr = static_cast<const float*>(act) + t * cols;
    for (int64_t e = lane; e < cols; e += 32) sum = fmaf(wr[e], xr[e], sum);
  } else if constexpr (K == kF16s) {
    const __half* wr = static_cast<const __half*>(w.q) + r * cols;
    const __half* xr = static_cast<const __half*>(act) + t * cols;
    for (int64_t e = lane; e < cols; e += 32)
      sum = fmaf(__half2float(wr[e]), __half2float(xr[e]), sum);
  } else {  // kBF16s
    const __nv_bfloat16* wr = static_cast<const __nv_bfloat16*>(w.q) + r * cols;
    const __nv_bfloat16* xr = static_cast<const __nv_bfloat16*>(act) + t * cols;
    for (int64_t e = lane; e < cols; e += 32)
      sum = fmaf(__bfloat162float(wr[e]), __bfloat162float(xr[e]), sum);
  }
  return sum;
}

constexpr int kMatvecThreads = 256;  // 8 rows per block

template <int K>
__global__ void __launch_bounds__(kMatvecThreads)
    matvec_kernel(DevMatrix w, const void* act, int64_t n, float* y, int64_t ldy) {
  pdl_wait();
  const int lane = threadIdx.x % 32;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * (kMatvecThreads / 32) + threadIdx.x / 32;
  const int64_t t = blockIdx.y;
  if (r >= w.rows) return;
  const float sum = warp_sum(row_dot<K>(w, act, r, t, w.cols, n, lane));
  if (lane == 0) y[t * ldy + r] = sum;
}

// ---- one token of the file's blocks (K-quants, Q4_1/Q5_0/Q5_1) ----------------------------------

// A warp per row and token: the row's blocks come into the warp's shared tile with aligned
// 16-byte loads (the tile covers them from the 16-byte boundary below, so any block size and
// row offset works), then each lane dequantizes 16-element groups from the tile against the
// f32 activations. Reading each group's bytes straight from global memory, a byte a load, a
// 1B-shape Q4_K_M decoded at 328 GB/s on the H200.
constexpr int kBlocksWarps = 4;
constexpr int kBlocksTile = 4608;  // bytes of whole blocks a tile (32 Q4_K, 21 Q6_K, ...)

// One instance per type: the type's block layout is then a constant, and kq_group16's switch
// and offsets fold away inside the loop (same arithmetic, so the same bits).
template <GgmlType type>
__global__ void __launch_bounds__(kBlocksWarps * 32)
    matvec_blocks_kernel(DevMatrix w, const float* act, float* y, int64_t ldy) {
  __shared__ __align__(16) uint8_t tiles[kBlocksWarps][kBlocksTile + 32];
  pdl_wait();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kBlocksWarps + warp, t = blockIdx.y;
  if (r >= w.rows) return;  // the whole warp: nothing below syncs the block
  const int bb = kq_block_bytes(type), per = kq_block_elements(type) / 16;
  const int64_t nb = w.cols / kq_block_elements(type);
  const uint8_t* row = static_cast<const uint8_t*>(w.q) + r * nb * bb;
  const float* x = act + t * w.cols;
  uint8_t* tile = tiles[warp];
  const int tile_blocks = kBlocksTile / bb;
  float sum = 0.0f;
  for (int64_t b0 = 0; b0 < nb; b0 += tile_blocks) {
    const int blocks = static_cast<int>(nb - b0 < tile_blocks ? nb - b0 : tile_blocks);
    const auto from = reinterpret_cast<uintptr_t>(row + b0 * bb);
    const uintptr_t a0 = from & ~uintptr_t{15}, a1 = (from + blocks * bb + 15) & ~uintptr_t{15};
    const int units = static_cast<int>((a1 - a0) / 16);
    const auto* src = reinterpret_cast<const uint4*>(a0);
    __syncwarp();  // the last tile's groups are read
#pragma unroll 4
    for (int u = lane; u < units; u += 32) reinterpret_cast<uint4*>(tile)[u] = __ldg(src + u);
    __syncwarp();
    const uint8_t* tb = tile + (from - a0);
    const float* xb = x + b0 * per * 16;
    for (int g = lane; g < blocks * per; g += 32) {
      float v[16];
      kq_group16(type, tb + (g / per) * bb, g % per, v);
      const float4* xg = reinterpret_cast<const float4*>(xb + g * 16);
#pragma unroll
      for (int i = 0; i < 4; ++i)
        sum += dot4_f(make_float4(v[4 * i], v[4 * i + 1], v[4 * i + 2], v[4 * i + 3]), xg[i]);
    }
  }
  sum = warp_sum(sum);
  if (lane == 0) y[t * ldy + r] = sum;
}

// ---- one token, variants v1..v5: a chunk's loads issued together --------------------------------

// A row is a run of 16-byte units: Q8_0 16 elements, Q4_0 one 32-element block, F16/BF16 8.
template <int K>
__device__ __forceinline__ int64_t units_per_row(int64_t cols) {
  return K == kQ4 ? cols / kQ : K == kQ8 ? cols / 16 : cols / 8;
}

// Unit u of a row (weights a, weight scale ws) against the activation's unit u of token t.
template <int K>
__device__ __forceinline__ float unit_dot(int4 a, __half ws, const void* act, int64_t t,
                                          int64_t cols, int64_t n, int64_t u) {
  if constexpr (K == kQ8) {
    const int8_t* xq = static_cast<const int8_t*>(act) + t * cols;
    const float* xd = reinterpret_cast<const float*>(static_cast<const int8_t*>(act) + n * cols) +
                      t * (cols / kQ);
    const int4 b = *reinterpret_cast<const int4*>(xq + u * 16);
    return static_cast<float>(dot16_i8(a, b, 0)) * (__half2float(ws) * xd[u / 2]);
  } else if constexpr (K == kQ4) {
    const int8_t* xq = static_cast<const int8_t*>(act) + t * cols;
    const float* xd = reinterpret_cast<const float*>(static_cast<const int8_t*>(act) + n * cols) +
                      t * (cols / kQ);
    const int4 x0 = *reinterpret_cast<const int4*>(xq + u * kQ);
    const int4 x1 = *reinterpret_cast<const int4*>(xq + u * kQ + 16);
    int isum = 0;
    isum = __dp4a(a.x & 0x0f0f0f0f, x0.x, isum);
    isum = __dp4a(a.y & 0x0f0f0f0f, x0.y, isum);
    isum = __dp4a(a.z & 0x0f0f0f0f, x0.z, isum);
    isum = __dp4a(a.w & 0x0f0f0f0f, x0.w, isum);
    isum = __dp4a((a.x >> 4) & 0x0f0f0f0f, x1.x, isum);
    isum = __dp4a((a.y >> 4) & 0x0f0f0f0f, x1.y, isum);
    isum = __dp4a((a.z >> 4) & 0x0f0f0f0f, x1.z, isum);
    isum = __dp4a((a.w >> 4) & 0x0f0f0f0f, x1.w, isum);
    const int4 ones = make_int4(0x01010101, 0x01010101, 0x01010101, 0x01010101);
    const int xs = dot16_i8(ones, x0, dot16_i8(ones, x1, 0));
    return static_cast<float>(isum - 8 * xs) * (__half2float(ws) * xd[u]);
  } else {
    const int4 b = *reinterpret_cast<const int4*>(static_cast<const uint16_t*>(act) + t * cols + u * 8);
    return dot8_16<K>(a, b);
  }
}

// 16 weight bytes, read-only; Hint: not kept in L1 (the activation stays there) and the L2
// asked to fetch 256-byte spans.
template <bool Hint>
__device__ __forceinline__ int4 load_w16(const int4* p) {
  if constexpr (Hint) {
    int4 v;
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.s32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
  } else {
    return __ldg(p);
  }
}

// A group of W warps (32 * W threads) owns R consecutive rows; per chunk every thread issues U
// 16-byte weight loads per row (units g, g + 32W, ...) and the block scales they need before
// any dot, so a group has R * U * W * 512 bytes in flight and no lane runs a serial tail. A
// block is 128 threads: 4 / W groups. Rows past the end read the last row and are not
// written.
template <int K, int W, int R, int U, bool Hint>
__global__ void __launch_bounds__(128)
    matvec_chunk_kernel(DevMatrix w, const void* act, int64_t n, float* y, int64_t ldy) {
  constexpr int G = 32 * W;
  const int g = threadIdx.x % G;
  const int64_t r0 = (static_cast<int64_t>(blockIdx.x) * (128 / G) + threadIdx.x / G) * R;
  const int64_t t = blockIdx.y;
  if (r0 >= w.rows) {  // W > 1: the whole block returns together
    pdl_wait();
    return;
  }
  const int64_t cols = w.cols, units = units_per_row<K>(cols);
  constexpr bool kScaled = K == kQ8 || K == kQ4;
  const int4* wrow[R];
  const __half* drow[R];
#pragma unroll
  for (int i = 0; i < R; ++i) {
    const int64_t r = r0 + i < w.rows ? r0 + i : w.rows - 1;
    wrow[i] = reinterpret_cast<const int4*>(static_cast<const uint8_t*>(w.q) + r * units * 16);
    drow[i] = kScaled ? static_cast<const __half*>(w.d) + r * (cols / kQ) : nullptr;
  }
  // The weights depend on no earlier kernel: the first chunk heads for L2 while the grid
  // before this one (programmatic dependent launch) drains.
#pragma unroll
  for (int u = 0; u < U; ++u)
#pragma unroll
    for (int i = 0; i < R; ++i)
      if (g + static_cast<int64_t>(G) * u < units)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(wrow[i] + g + static_cast<int64_t>(G) * u));
  pdl_wait();
  float sum[R];
#pragma unroll
  for (int i = 0; i < R; ++i) sum[i] = 0.0f;
  for (int64_t base = g; base < units; base += static_cast<int64_t>(G) * U) {
    int4 a[R][U];
    __half ws[R][U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t idx = base + static_cast<int64_t>(G) * u;
      const bool in = idx < units;
#pragma unroll
      for (int i = 0; i < R; ++i) {
        a[i][u] = in ? load_w16<Hint>(wrow[i] + idx) : make_int4(0, 0, 0, 0);
        if constexpr (kScaled)
          ws[i][u] = in ? __ldg(drow[i] + (K == kQ8 ? idx / 2 : idx)) : __float2half_rn(0.0f);
        else
          ws[i][u] = __float2half_rn(0.0f);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t idx = base + static_cast<int64_t>(G) * u;
      if (idx < units) {
#pragma unroll
        for (int i = 0; i < R; ++i) sum[i] += unit_dot<K>(a[i][u], ws[i][u], act, t, cols, n, idx);
      }
    }
  }
  if constexpr (W == 1) {
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const float v = warp_sum(sum[i]);
      if (g == 0 && r0 + i < w.rows) y[t * ldy + r0 + i] = v;
    }
  } else {
    __shared__ float part[R][W];
    const int warp = threadIdx.x / 32;
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const float v = warp_sum(sum[i]);
      if (threadIdx.x % 32 == 0) part[i][warp] = v;
    }
    __syncthreads();
    if (g < R && r0 + g < w.rows) {
      float v = 0.0f;
#pragma unroll
      for (int j = 0; j < W; ++j) v += part[g][j];
      y[t * ldy + r0 + g] = v;
    }
  }
}

// v6, v7: a grid that stays resident (as many blocks of 4 warps as the multiprocessors hold)
// streams the rows: each warp takes rows warp, warp + all warps, ..., each row in chunks of
// 32 * U units, and issues the loads of its next chunk (this row's or its next row's) before
// the dots of the current one. So a warp always has a chunk in flight, and no block ends and
// another starts between rows (the chunk variants above pay that once per 4 rows). Small
// chunks keep registers low and more warps resident: on the H200 U = 2 read the 12B q8_0
// shapes in 3.42 ms a token against 3.66 for U = 4, 3.74 for U = 8 and v5's 3.83.
// NT > 1: each warp takes up to NT tokens (t0 = blockIdx.y * NT ..) against the rows it
// loads once; every token's sum runs in the order of NT = 1, so a small batch (a speculative
// verify) gets each token's one-token bits.
template <int K, int U, int NT>
__global__ void __launch_bounds__(128)
    matvec_stream_kernel(DevMatrix w, const void* act, int64_t n, float* y, int64_t ldy) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * 4;
  int64_t row = static_cast<int64_t>(blockIdx.x) * 4 + threadIdx.x / 32;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * NT;
  const int nt = static_cast<int>(n - t0 < NT ? n - t0 : NT);
  const int64_t cols = w.cols, units = units_per_row<K>(cols);
  const int64_t chunks = (units + 32 * U - 1) / (32 * U);
  constexpr bool kScaled = K == kQ8 || K == kQ4;
  auto load = [&](int64_t r, int64_t c, int4 (&a)[U], __half (&ws)[U]) {
    const int4* wr =
        reinterpret_cast<const int4*>(static_cast<const uint8_t*>(w.q) + r * units * 16);
    const __half* dr = kScaled ? static_cast<const __half*>(w.d) + r * (cols / kQ) : nullptr;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t idx = c * 32 * U + lane + 32 * u;
      const bool in = idx < units;
      a[u] = in ? load_w16<true>(wr + idx) : make_int4(0, 0, 0, 0);
      if constexpr (kScaled)
        ws[u] = in ? __ldg(dr + (K == kQ8 ? idx / 2 : idx)) : __float2half_rn(0.0f);
      else
        ws[u] = __float2half_rn(0.0f);
    }
  };
  // No earlier grid writes the weights: the first chunk is loaded while the grid before drains.
  int4 a[U];
  __half ws[U];
  if (row < w.rows) load(row, 0, a, ws);
  pdl_wait();
  if (row >= w.rows) return;
  int64_t c = 0;
  float sum[NT];
#pragma unroll
  for (int j = 0; j < NT; ++j) sum[j] = 0.0f;
  for (;;) {
    int64_t next_row = row, next_c = c + 1;
    if (next_c == chunks) {
      next_row = row + warps;
      next_c = 0;
    }
    const bool more = next_row < w.rows;  // the same for the whole warp
    int4 b[U];
    __half bs[U];
    if (more) load(next_row, next_c, b, bs);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t idx = c * 32 * U + lane + 32 * u;
#pragma unroll
      for (int j = 0; j < NT; ++j)
        if (j < nt && idx < units) sum[j] += unit_dot<K>(a[u], ws[u], act, t0 + j, cols, n, idx);
    }
    if (next_c == 0) {  // the row is done
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        if (j >= nt) break;
        const float v = warp_sum(sum[j]);
        if (lane == 0) y[(t0 + j) * ldy + row] = v;
        sum[j] = 0.0f;
      }
    }
    if (!more) break;
    row = next_row;
    c = next_c;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      a[u] = b[u];
      ws[u] = bs[u];
    }
  }
}

// Blocks of matvec_stream_kernel<K, U, NT> that the device holds at once (at most one per 4
// rows), times the passes of NT tokens that n needs.
template <int K, int U, int NT>
void launch_stream(const DevMatrix& w, const void* act, int64_t n, float* y, int64_t ldy,
                   cudaStream_t s) {
  static const int resident = [] {
    int dev = 0, sms = 0, per_sm = 0;
    check(cudaGetDevice(&dev), "cudaGetDevice");
    check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "SM count");
    check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, matvec_stream_kernel<K, U, NT>,
                                                        128, 0),
          "occupancy");
    return std::max(1, sms * per_sm);
  }();
  // Every warp takes the same number of rows (k): with as many warps as fit, 8,192 rows on
  // 6,336 warps left 1,856 of them a second row while the rest idled.
  const int64_t fit = static_cast<int64_t>(resident) * 4;
  const int64_t k = std::max<int64_t>(1, (w.rows + fit - 1) / fit);
  const int64_t blocks = ((w.rows + k - 1) / k + 3) / 4;
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>((n + NT - 1) / NT));
  launch_k(matvec_stream_kernel<K, U, NT>, grid, 128, 0, s, w, act, n, y, ldy);
}

template <int K, int U>
void launch_stream(const DevMatrix& w, const void* act, int64_t n, float* y, int64_t ldy,
                   cudaStream_t s) {
  // The fewest token slots that hold n: each slot costs registers (16 take 90 a thread
  // against 40 for one), and fewer registers keep more warps streaming.
  static_assert(kVerifyTokens == 16);
  if (n == 1)
    launch_stream<K, U, 1>(w, act, n, y, ldy, s);
  else if (n == 2)
    launch_stream<K, U, 2>(w, act, n, y, ldy, s);
  else if (n <= 4)
    launch_stream<K, U, 4>(w, act, n, y, ldy, s);
  else if (n <= 8)
    launch_stream<K, U, 8>(w, act, n, y, ldy, s);
  else
    launch_stream<K, U, kVerifyTokens>(w, act, n, y, ldy, s);
}

// ---- one token, v8: rows brought into shared memory by the copy engine --------------------------

// v8 (matvec_bulk_kernel, sm_90): one block a multiprocessor owns a run of rows, dealt to its
// kBulkWarps warps in turn. Each warp has a ring of kBulkStages shared-memory stages, and its
// lane 0 asks the copy engine (cp.async.bulk, completing on the stage's mbarrier) for one row
// chunk of up to kBulkUnits 16-byte units and its block scales a stage; the lanes dot the chunk
// from shared memory, against the activation the block copied there once, in v6's order (units
// lane, lane + 32, ... of each row), so v8 gives v6's bits. Each warp's ring is requested
// before the PDL wait (the weights are no kernel's output): while the small kernels between
// two products run, the next product's first 17 MB (128 KiB a multiprocessor) are already on
// their way, where v6 has 1 KiB a warp in registers. On the H200 16 warps of 2 stages of 4 KiB
// measured best (docs/cuda.md): fewer warps or deeper rings were slower.
constexpr int kBulkWarps = 16;
constexpr int kBulkStages = 2;
constexpr int kBulkUnits = 256;  // 4 KiB of weights a stage

struct BulkStage {
  int4 w[kBulkUnits];
  // The chunk's block scales (up to kBulkUnits halves, Q4_0), their span widened to 16 bytes.
  __align__(16) uint8_t scales[kBulkUnits * 2 + 32];
};

constexpr size_t kBulkRingBytes = (sizeof(BulkStage) + sizeof(uint64_t)) * kBulkWarps * kBulkStages;
constexpr size_t kBulkSmemMax = 227 * 1024;  // sm_90's most shared memory a block

// The one-token activation's bytes in unit_dot's layout (Q8_0/Q4_0: cols int8 then cols / 32
// f32 scales; F16/BF16: cols halves), which v8 copies into shared memory.
template <int K>
constexpr int64_t bulk_act_bytes(int64_t cols) {
  return K == kQ8 || K == kQ4 ? cols + cols / kQ * 4 : cols * 2;
}

// matmul_logits_to_host's windows: the host's copy of the results goes out kHostWindow rows
// at a time. A store of one float each over PCIe is one transaction each (stop 39 measured
// 262,144 of them 76-200 us slower than the 1 MiB copy after the kernel); a warp's 32 floats
// in a row go out together, and the windows of a block complete one after another while the
// product still runs, so the copy hides behind the weights' reads.
constexpr int64_t kHostWindow = 256;

// Windows (absolute rows [k * kHostWindow, (k + 1) * kHostWindow)) meeting a block's rows.
__host__ __device__ constexpr int64_t host_windows(int64_t per_block) {
  return per_block / kHostWindow + 2;
}

// Block b owns rows [b * per_block, (b + 1) * per_block); warp w of it rows w, w + kBulkWarps,
// ... of those. One token. host_y (pinned host memory, or null): the results are also staged in
// shared memory, and the warp finishing the last row of a window stores the window's rows to
// host_y and sets *host_bad if one is not finite (matmul_logits_to_host).
template <int K>
__global__ void __launch_bounds__(kBulkWarps * 32)
    matvec_bulk_kernel(DevMatrix w, const void* act, float* y, int64_t per_block, float* host_y,
                       uint32_t* host_bad) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) uint8_t bulk_smem[];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  BulkStage* ring = reinterpret_cast<BulkStage*>(bulk_smem) + warp * kBulkStages;
  uint64_t* bars =
      reinterpret_cast<uint64_t*>(bulk_smem + sizeof(BulkStage) * kBulkWarps * kBulkStages) +
      warp * kBulkStages;
  uint8_t* xs = bulk_smem + kBulkRingBytes;  // the activation
  const int64_t b0 = static_cast<int64_t>(blockIdx.x) * per_block;
  const int64_t b1 = b0 + per_block < w.rows ? b0 + per_block : w.rows;
  // With host_y: the block's results, then a count of finished rows a window.
  float* staged = reinterpret_cast<float*>(xs + (bulk_act_bytes<K>(w.cols) + 15) / 16 * 16);
  uint32_t* finished = reinterpret_cast<uint32_t*>(staged + per_block);
  const int64_t window0 = b0 / kHostWindow;
  const int64_t first = b0 + warp;
  const int64_t rows = first < b1 ? (b1 - first + kBulkWarps - 1) / kBulkWarps : 0;
  const int64_t cols = w.cols, units = units_per_row<K>(cols);
  const int64_t per_row = (units + kBulkUnits - 1) / kBulkUnits;  // chunks a row
  const int64_t total = rows * per_row;
  constexpr bool kScaled = K == kQ8 || K == kQ4;
  // Chunk j: row first + (j / per_row) * kBulkWarps, units from (j % per_row) * kBulkUnits.
  auto scales_of = [&](int64_t r, int64_t u0) {
    return static_cast<const __half*>(w.d) + r * (cols / kQ) + (K == kQ8 ? u0 / 2 : u0);
  };
  auto issue = [&](int64_t j) {
    BulkStage& st = ring[j % kBulkStages];
    uint64_t* bar = &bars[j % kBulkStages];
    const int64_t r = first + (j / per_row) * kBulkWarps, u0 = (j % per_row) * kBulkUnits;
    const int nu = static_cast<int>(units - u0 < kBulkUnits ? units - u0 : kBulkUnits);
    const uint8_t* src = static_cast<const uint8_t*>(w.q) + (r * units + u0) * 16;
    const uint32_t bytes = static_cast<uint32_t>(nu) * 16;
    uint32_t sbytes = 0;
    uintptr_t s0 = 0;
    if constexpr (kScaled) {
      // The copy engine takes 16-byte aligned spans: the scales' span widened to them (the
      // allocation is padded to 256 bytes, and a neighbouring matrix's scales are harmless).
      const __half* d = scales_of(r, u0);
      const int nd = K == kQ8 ? nu / 2 : nu;
      s0 = reinterpret_cast<uintptr_t>(d) & ~uintptr_t{15};
      sbytes =
          static_cast<uint32_t>(((reinterpret_cast<uintptr_t>(d + nd) + 15) & ~uintptr_t{15}) - s0);
    }
    bar_expect(bar, bytes + sbytes);
    bulk_copy(st.w, src, bytes, bar);
    if constexpr (kScaled) bulk_copy(st.scales, reinterpret_cast<const void*>(s0), sbytes, bar);
  };
  if (lane == 0) {
    for (int s = 0; s < kBulkStages; ++s) bar_init(&bars[s]);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    for (int64_t j = 0; j < total && j < kBulkStages; ++j) issue(j);
  }
  pdl_wait();
  {  // the activation, once a block: every row reads all of it
    const int64_t words = bulk_act_bytes<K>(cols) / 4;
    const uint32_t* src = static_cast<const uint32_t*>(act);
    for (int64_t i = threadIdx.x; i < words; i += kBulkWarps * 32)
      reinterpret_cast<uint32_t*>(xs)[i] = src[i];
    if (host_y)
      for (int64_t i = threadIdx.x; i < host_windows(per_block); i += kBulkWarps * 32)
        finished[i] = 0;
  }
  __syncthreads();
  float sum = 0.0f;
  for (int64_t j = 0; j < total; ++j) {
    BulkStage& st = ring[j % kBulkStages];
    bar_wait(&bars[j % kBulkStages], static_cast<uint32_t>((j / kBulkStages) & 1));
    const int64_t r = first + (j / per_row) * kBulkWarps, c = j % per_row, u0 = c * kBulkUnits;
    const int nu = static_cast<int>(units - u0 < kBulkUnits ? units - u0 : kBulkUnits);
    const __half* sc = nullptr;
    if constexpr (kScaled)
      sc = reinterpret_cast<const __half*>(st.scales) +
           (reinterpret_cast<uintptr_t>(scales_of(r, u0)) & 15) / 2;
#pragma unroll
    for (int k = 0; k < kBulkUnits / 32; ++k) {  // all the chunk's loads issued together
      const int i = lane + 32 * k;
      if (i < nu) {
        const __half ws = kScaled ? sc[K == kQ8 ? i / 2 : i] : __float2half_rn(0.0f);
        sum += unit_dot<K>(st.w[i], ws, xs, 0, cols, 1, u0 + i);
      }
    }
    if (c == per_row - 1) {
      const float v = warp_sum(sum);
      if (lane == 0) y[r] = v;
      if (host_y) {
        const int64_t k = r / kHostWindow;
        const int64_t lo = k * kHostWindow > b0 ? k * kHostWindow : b0;
        const int64_t hi = (k + 1) * kHostWindow < b1 ? (k + 1) * kHostWindow : b1;
        int last = 0;
        if (lane == 0) {
          staged[r - b0] = v;
          __threadfence_block();  // the row is seen before the count that says it is there
          last = atomicAdd(&finished[k - window0], 1u) == static_cast<uint32_t>(hi - lo - 1);
          if (last) __threadfence_block();
        }
        if (__shfl_sync(0xffffffffu, last, 0)) {
          __syncwarp();
          bool bad = false;
          for (int64_t i = lo + lane; i < hi; i += 32) {
            const float x = staged[i - b0];
            host_y[i] = x;
            bad = bad || !isfinite(x);
          }
          if (__any_sync(0xffffffffu, bad) && lane == 0) *host_bad = 1;
        }
      }
      sum = 0.0f;
    }
    __syncwarp();  // every lane has read the stage before it is filled again
    if (lane == 0 && j + kBulkStages < total) issue(j + kBulkStages);
  }
#else
  __trap();  // launched only on sm_90 and later (launch_bulk)
#endif
}

// The current device's multiprocessors for v8's grid, with matvec_bulk_kernel<K>'s shared
// memory limit raised there; 0 where the device is older than sm_90 (cp.async.bulk and
// mbarrier transaction counts). A kernel attribute belongs to one device: each device the
// process uses is prepared once.
template <int K>
int bulk_multiprocessors() {
  static std::mutex mu;
  static std::map<int, int> prepared;
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  const std::lock_guard<std::mutex> lock(mu);
  if (const auto it = prepared.find(dev); it != prepared.end()) return it->second;
  int major = 0, n = 0;
  check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev), "compute capability");
  check(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev), "SM count");
  if (major >= 9)
    check(cudaFuncSetAttribute(matvec_bulk_kernel<K>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(kBulkSmemMax)),
          "v8 shared memory");
  return prepared[dev] = major >= 9 ? std::max(1, n) : 0;
}

// One block a multiprocessor (at most one a kBulkWarps rows), each the same number of rows.
// False, launching nothing, where the device is older than sm_90 or the activation does not
// fit beside the rings (Q8_0/Q4_0 rows past about 74,000 elements, F16/BF16 past about
// 41,000): the caller runs v6 then.
template <int K>
bool launch_bulk(const DevMatrix& w, const void* act, float* y, cudaStream_t s,
                 float* host_y = nullptr, uint32_t* host_bad = nullptr) {
  const int sms = bulk_multiprocessors<K>();
  if (sms == 0) return false;
  const int64_t blocks = std::min<int64_t>(sms, (w.rows + kBulkWarps - 1) / kBulkWarps);
  const int64_t per_block = (w.rows + blocks - 1) / blocks;
  size_t smem = kBulkRingBytes + (static_cast<size_t>(bulk_act_bytes<K>(w.cols)) + 15) / 16 * 16;
  if (host_y)
    smem += static_cast<size_t>(per_block) * 4 + static_cast<size_t>(host_windows(per_block)) * 4;
  if (smem > kBulkSmemMax) return false;
  launch_k(matvec_bulk_kernel<K>, dim3(static_cast<unsigned>((w.rows + per_block - 1) / per_block)),
           kBulkWarps * 32, smem, s, w, act, y, per_block, host_y, host_bad);
  return true;
}

// The chunk variants: {W, R, U, hint} (cuda_kernels.h).
template <int K, int W, int R, int U, bool Hint>
void launch_chunk(const DevMatrix& w, const void* act, int64_t n, float* y, int64_t ldy,
                  cudaStream_t s) {
  constexpr int64_t per_block = (128 / (32 * W)) * R;
  const dim3 grid(static_cast<unsigned>((w.rows + per_block - 1) / per_block), static_cast<unsigned>(n));
  launch_k(matvec_chunk_kernel<K, W, R, U, Hint>, grid, 128, 0, s, w, act, n, y, ldy);
}

template <int K>
void launch_matvec_chunk(int variant, const DevMatrix& w, const void* act, int64_t n, float* y,
                         int64_t ldy, cudaStream_t s) {
  switch (variant) {
    case 1:
      launch_chunk<K, 1, 1, 8, false>(w, act, n, y, ldy, s);
      break;
    case 2:
      launch_chunk<K, 1, 1, 8, true>(w, act, n, y, ldy, s);
      break;
    case 3:
      launch_chunk<K, 1, 2, 8, true>(w, act, n, y, ldy, s);
      break;
    case 4:
      launch_chunk<K, 1, 1, 4, true>(w, act, n, y, ldy, s);
      break;
    case 6:
      launch_stream<K, 2>(w, act, n, y, ldy, s);
      break;
    case 7:
      launch_stream<K, 1>(w, act, n, y, ldy, s);
      break;
    case 8:
      if (!(n == 1 && launch_bulk<K>(w, act, y, s))) launch_stream<K, 2>(w, act, n, y, ldy, s);
      break;
    default:
      launch_chunk<K, 4, 4, 2, true>(w, act, n, y, ldy, s);
      break;
  }
}

// ---- several tokens: tensor-core tiles --------------------------------------------------------

constexpr int kBM = 128, kBN = 64, kBK = 32, kPad = 8, kGemmThreads = 256;
constexpr int kLdA = kBK + kPad, kLdC = kBM + 4;

// 16 weights of row r from column k (a multiple of 16) as T, into dst; zeros past the last row.
template <int K, typename T>
__device__ __forceinline__ void load_a16(const DevMatrix& w, int64_t r, int64_t k, T* dst) {
  if (r >= w.rows) {
    *reinterpret_cast<int4*>(dst) = make_int4(0, 0, 0, 0);
    *reinterpret_cast<int4*>(dst + 8) = make_int4(0, 0, 0, 0);
    return;
  }
  const int64_t cols = w.cols;
  if constexpr (K == kF16 || K == kBF16) {
    const uint16_t* src = static_cast<const uint16_t*>(w.q) + r * cols + k;
    *reinterpret_cast<int4*>(dst) = __ldg(reinterpret_cast<const int4*>(src));
    *reinterpret_cast<int4*>(dst + 8) = __ldg(reinterpret_cast<const int4*>(src + 8));
  } else if constexpr (K == kQ8) {
    const int4 v = __ldg(reinterpret_cast<const int4*>(static_cast<const int8_t*>(w.q) + r * cols + k));
    const float d = __half2float(static_cast<const __half*>(w.d)[r * (cols / kQ) + k / kQ]);
    const int8_t* qs = reinterpret_cast<const int8_t*>(&v);
#pragma unroll
    for (int i = 0; i < 16; ++i) dst[i] = from_float<T>(d * static_cast<float>(qs[i]));
  } else if constexpr (K == kKq) {
    float v[16];
    kq_row_group16(w.type, static_cast<const uint8_t*>(w.q) + r * kq_row_bytes(w.type, cols),
                   k / 16, v);
#pragma unroll
    for (int i = 0; i < 16; ++i) dst[i] = from_float<T>(v[i]);
  } else {  // kQ4: elements 0..15 are the low nibbles of the block's 16 bytes, 16..31 the high
    const int64_t b = r * (cols / kQ) + k / kQ;
    const int4 v = __ldg(reinterpret_cast<const int4*>(static_cast<const uint8_t*>(w.q) + b * 16));
    const float d = __half2float(static_cast<const __half*>(w.d)[b]);
    const uint8_t* qs = reinterpret_cast<const uint8_t*>(&v);
    const int shift = (k % kQ) ? 4 : 0;
#pragma unroll
    for (int i = 0; i < 16; ++i)
      dst[i] = from_float<T>(d * static_cast<float>(((qs[i] >> shift) & 0x0f) - 8));
  }
}

template <int K, typename T>
__global__ void __launch_bounds__(kGemmThreads)
    gemm_kernel(DevMatrix w, const T* x, int64_t n, float* y, int64_t ldy) {
  pdl_wait();
  using namespace nvcuda;
  constexpr int kAB = (kBM + kBN) * kLdA * 2, kC = kBN * kLdC * 4;
  __shared__ __align__(128) unsigned char smem[kAB > kC ? kAB : kC];
  T* As = reinterpret_cast<T*>(smem);  // [kBM][kLdA]
  T* Bs = As + kBM * kLdA;             // [kBN][kLdA]
  float* Cs = reinterpret_cast<float*>(smem);  // column-major [kBN][kLdC]

  const int tid = threadIdx.x, warp = tid / 32;
  const int wm = warp % 4, wn = warp / 4;  // 32 rows x 32 tokens per warp
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kBM;
  const int64_t tok0 = static_cast<int64_t>(blockIdx.y) * kBN;
  const int64_t cols = w.cols;

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

  for (int64_t k0 = 0; k0 < cols; k0 += kBK) {
    load_a16<K, T>(w, row0 + tid / 2, k0 + (tid % 2) * 16, As + (tid / 2) * kLdA + (tid % 2) * 16);
    {
      const int64_t tk = tok0 + tid / 4;
      int4* dst = reinterpret_cast<int4*>(Bs + (tid / 4) * kLdA + (tid % 4) * 8);
      *dst = tk < n ? *reinterpret_cast<const int4*>(x + tk * cols + k0 + (tid % 4) * 8)
                    : make_int4(0, 0, 0, 0);
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> b[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(a[i], As + (wm * 32 + i * 16) * kLdA + kk, kLdA);
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(b[j], Bs + (wn * 32 + j * 16) * kLdA + kk, kLdA);
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j)
      wmma::store_matrix_sync(Cs + (wn * 32 + j * 16) * kLdC + wm * 32 + i * 16, acc[i][j], kLdC,
                              wmma::mem_col_major);
  __syncthreads();
  for (int idx = tid; idx < kBM * kBN; idx += kGemmThreads) {
    const int m = idx % kBM, t = idx / kBM;
    if (row0 + m < w.rows && tok0 + t < n) y[(tok0 + t) * ldy + row0 + m] = Cs[t * kLdC + m];
  }
}

// Rows r0 .. r0 + rows of w as f16 (bf16 for BF16 weights) into out [rows][cols], with
// load_a16's arithmetic: the weights the tiles would put in shared memory, for cuBLAS.
template <int K, typename T>
__global__ void dequant_rows_kernel(DevMatrix w, int64_t r0, int64_t rows, T* out) {
  pdl_wait();
  const int64_t per_row = w.cols / 16;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * per_row) return;
  const int64_t r = i / per_row, k = (i % per_row) * 16;
  __align__(16) T v[16];  // then two 16-byte stores: 16 scalar ones left most of each write idle
  load_a16<K, T>(w, r0 + r, k, v);
  int4* dst = reinterpret_cast<int4*>(out + r * w.cols + k);
  dst[0] = reinterpret_cast<const int4*>(v)[0];
  dst[1] = reinterpret_cast<const int4*>(v)[1];
}

// ---- embedding rows -------------------------------------------------------------------------

__device__ __forceinline__ float weight_at(const DevMatrix& w, int64_t r, int64_t i) {
  const int64_t cols = w.cols;
  switch (w.type) {
    case GgmlType::F32:
      return static_cast<const float*>(w.q)[r * cols + i];
    case GgmlType::F16:
      return __half2float(static_cast<const __half*>(w.q)[r * cols + i]);
    case GgmlType::BF16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(w.q)[r * cols + i]);
    case GgmlType::Q8_0:
      return __half2float(static_cast<const __half*>(w.d)[r * (cols / kQ) + i / kQ]) *
             static_cast<float>(static_cast<const int8_t*>(w.q)[r * cols + i]);
    case GgmlType::Q4_0: {
      const int64_t b = r * (cols / kQ) + i / kQ;
      const int j = static_cast<int>(i % kQ);
      const uint8_t byte = static_cast<const uint8_t*>(w.q)[b * 16 + j % 16];
      const int nib = j < 16 ? (byte & 0x0f) : (byte >> 4);
      return __half2float(static_cast<const __half*>(w.d)[b]) * static_cast<float>(nib - 8);
    }
    default: {  // the file's blocks: the element's group, dequantized
      float v[16];
      kq_row_group16(w.type, static_cast<const uint8_t*>(w.q) + r * kq_row_bytes(w.type, cols),
                     i / 16, v);
      return v[i % 16];
    }
  }
}

// A thread an element (blocks of kEmbedThreads along the row, a row of blocks a token): a
// loop over the row in one block waited for each element's loads in turn (its store might
// alias the weights), 9 us of the H200's 12B decode step.
constexpr int kEmbedThreads = 256;

__global__ void embed_kernel(DevMatrix w, const int32_t* tokens, float scale, float* x) {
  pdl_wait();
  const int64_t t = blockIdx.y;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kEmbedThreads + threadIdx.x;
  if (i >= w.cols) return;
  const float v = weight_at(w, tokens[t], i);
  x[t * w.cols + i] = scale != 1.0f ? v * scale : v;
}

unsigned grid_for(int64_t n, int threads) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

bool quantized(GgmlType t) { return t == GgmlType::Q8_0 || t == GgmlType::Q4_0; }

void launch_matvec_blocks(const DevMatrix& w, const float* act, int64_t n, float* y, int64_t ldy,
                          cudaStream_t s) {
  const dim3 g(grid_for(w.rows, kBlocksWarps), static_cast<unsigned>(n));
  auto go = [&](auto kernel) { launch_k(kernel, g, kBlocksWarps * 32, 0, s, w, act, y, ldy); };
  switch (w.type) {
    case GgmlType::Q2_K:
      return go(matvec_blocks_kernel<GgmlType::Q2_K>);
    case GgmlType::Q3_K:
      return go(matvec_blocks_kernel<GgmlType::Q3_K>);
    case GgmlType::Q4_K:
      return go(matvec_blocks_kernel<GgmlType::Q4_K>);
    case GgmlType::Q5_K:
      return go(matvec_blocks_kernel<GgmlType::Q5_K>);
    case GgmlType::Q6_K:
      return go(matvec_blocks_kernel<GgmlType::Q6_K>);
    case GgmlType::Q4_1:
      return go(matvec_blocks_kernel<GgmlType::Q4_1>);
    case GgmlType::Q5_0:
      return go(matvec_blocks_kernel<GgmlType::Q5_0>);
    case GgmlType::Q5_1:
      return go(matvec_blocks_kernel<GgmlType::Q5_1>);
    default:
      throw_error("cuda: no one-token product for ggml type {}", static_cast<int>(w.type));
  }
}

}  // namespace

bool type_supported(GgmlType type) {
  switch (type) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q8_0:
    case GgmlType::Q4_0:
      return true;
    default:
      return is_file_block(type);
  }
}

size_t repacked_q_bytes(GgmlType type, int64_t rows, int64_t cols) {
  const auto n = static_cast<size_t>(rows * cols);
  switch (type) {
    case GgmlType::F32:
      return n * 4;
    case GgmlType::F16:
    case GgmlType::BF16:
      return n * 2;
    case GgmlType::Q8_0:
      return n;
    case GgmlType::Q4_0:
      return n / 2;
    default:  // K-quants and the legacy types with a minimum or a fifth bit: the file's blocks
      return static_cast<size_t>(rows * kq_row_bytes(type, cols));
  }
}

size_t repacked_d_bytes(GgmlType type, int64_t rows, int64_t cols) {
  return quantized(type) ? static_cast<size_t>(rows * (cols / kQ)) * 2 : 0;
}

void repack_weight(GgmlType type, const void* raw, int64_t rows, int64_t cols, void* q, void* d,
                   cudaStream_t s) {
  const int64_t nb = rows * (cols / kQ);
  if (type == GgmlType::Q8_0) {
    repack_blocks_kernel<32><<<grid_for(nb, 256), 256, 0, s>>>(
        static_cast<const uint8_t*>(raw), nb, static_cast<uint8_t*>(q), static_cast<uint16_t*>(d));
  } else if (type == GgmlType::Q4_0) {
    repack_blocks_kernel<16><<<grid_for(nb, 256), 256, 0, s>>>(
        static_cast<const uint8_t*>(raw), nb, static_cast<uint8_t*>(q), static_cast<uint16_t*>(d));
  } else {
    check(cudaMemcpyAsync(q, raw, repacked_q_bytes(type, rows, cols), cudaMemcpyDeviceToDevice, s),
          "copying a weight");
  }
  check_launch("repack_weight");
}

size_t act_bytes(GgmlType type, int64_t n, int64_t cols) {
  const auto e = static_cast<size_t>(n * cols);
  switch (type) {
    case GgmlType::F32:
      return e * 4;
    case GgmlType::F16:
    case GgmlType::BF16:
      return e * 2;
    case GgmlType::Q8_0:
    case GgmlType::Q4_0:  // Q8_0 blocks up to kVerifyTokens tokens, f16 for more
      return n <= kVerifyTokens ? e + static_cast<size_t>(n * (cols / kQ)) * 4 : e * 2;
    default:  // the file's blocks: f32 up to kVerifyTokens tokens, f16 for more
      return n <= kVerifyTokens ? e * 4 : e * 2;
  }
}

void convert_act(GgmlType type, const float* x, int64_t n, int64_t cols, int64_t ldx, void* out,
                 cudaStream_t s) {
  const dim3 grid(grid_for(cols, 256) < 64 ? grid_for(cols, 256) : 64, static_cast<unsigned>(n));
  if (quantized(type) && n <= kVerifyTokens) {
    const int64_t blocks = n * (cols / kQ);
    launch_k(quantize_q8_kernel, grid_for(blocks * 32, 256), 256, 0, s,
        x, n, cols, ldx, static_cast<int8_t*>(out),
        reinterpret_cast<float*>(static_cast<int8_t*>(out) + n * cols));
  } else if (type == GgmlType::F32 || (is_file_block(type) && n <= kVerifyTokens)) {
    launch_k(convert_kernel<float>, grid, 256, 0, s, x, cols, ldx, static_cast<float*>(out));
  } else if (type == GgmlType::BF16) {
    launch_k(convert_kernel<__nv_bfloat16>, grid, 256, 0, s, x, cols, ldx,
                                                       static_cast<__nv_bfloat16*>(out));
  } else {
    launch_k(convert_kernel<__half>, grid, 256, 0, s, x, cols, ldx, static_cast<__half*>(out));
  }
  check_launch("convert_act");
}

void matmul(const DevMatrix& w, const void* act, int64_t n, float* y, int64_t ldy, cudaStream_t s) {
  matmul_variant(w, act, n, y, ldy, s, n <= kVerifyTokens ? matvec_variant_for(w) : 0);
}

bool matmul_logits_to_host(const DevMatrix& w, const void* act, float* y, float* host_y,
                           uint32_t* host_bad, cudaStream_t s) {
  if (matvec_variant_for(w) != 8) return false;
  switch (w.type) {
    case GgmlType::Q8_0:
      return launch_bulk<kQ8>(w, act, y, s, host_y, host_bad);
    case GgmlType::Q4_0:
      return launch_bulk<kQ4>(w, act, y, s, host_y, host_bad);
    case GgmlType::F16:
      return launch_bulk<kF16>(w, act, y, s, host_y, host_bad);
    case GgmlType::BF16:
      return launch_bulk<kBF16>(w, act, y, s, host_y, host_bad);
    default:
      return false;
  }
}

// The many-token product through cuBLAS: F16/BF16 weights as they are, other types
// dequantized to f16 a chunk of rows at a time (at most kChunkBytes) into this thread's scratch.
// 128 MiB holds a 12B layer's down matrix (118 MB) whole and halves gate|up: 64 MiB cut down
// into GEMMs of 2,184 and 1,656 rows, too few tiles to fill the device.
void gemm_cublas(const DevMatrix& w, const void* act, int64_t n, float* y, int64_t ldy,
                 cudaStream_t s) {
  if (w.type == GgmlType::F16 || w.type == GgmlType::BF16) {
    cublas_gemm(w.q, act, w.type == GgmlType::BF16, w.rows, w.cols, n, y, ldy, s);
    return;
  }
  constexpr int64_t kChunkBytes = int64_t{128} << 20;
  const int64_t chunk = std::min(w.rows, std::max<int64_t>(kBM, kChunkBytes / (w.cols * 2)));
  // One scratch per thread and device, which this thread's streams take in turns: `done`
  // marks the end of its last use, which a use on another stream waits for.
  struct Scratch {
    DeviceBuffer buf;
    cudaEvent_t done = nullptr;
  };
  thread_local std::map<int, Scratch> scratch_by_device;
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  Scratch& scratch = scratch_by_device[dev];
  if (!scratch.done)
    check(cudaEventCreateWithFlags(&scratch.done, cudaEventDisableTiming), "a prefill event");
  const size_t need = static_cast<size_t>(chunk * w.cols * 2);
  if (scratch.buf.bytes() < need) {
    check(cudaEventSynchronize(scratch.done), "the prefill scratch");  // the old one is idle
    scratch.buf = DeviceBuffer(need, "the prefill's dequantized weights");
  }
  check(cudaStreamWaitEvent(s, scratch.done, 0), "the prefill scratch");
  __half* wf = scratch.buf.as<__half>();
  for (int64_t r0 = 0; r0 < w.rows; r0 += chunk) {
    const int64_t rows = std::min(chunk, w.rows - r0);
    const unsigned blocks = grid_for(rows * (w.cols / 16), 256);
    switch (w.type) {
      case GgmlType::Q8_0:
        launch_k(dequant_rows_kernel<kQ8, __half>, blocks, 256, 0, s, w, r0, rows, wf);
        break;
      case GgmlType::Q4_0:
        launch_k(dequant_rows_kernel<kQ4, __half>, blocks, 256, 0, s, w, r0, rows, wf);
        break;
      default:
        launch_k(dequant_rows_kernel<kKq, __half>, blocks, 256, 0, s, w, r0, rows, wf);
        break;
    }
    check_launch("dequant_rows");
    cublas_gemm(wf, act, false, rows, w.cols, n, y + r0, ldy, s);
  }
  check(cudaEventRecord(scratch.done, s), "a prefill event");
}

void matmul_variant(const DevMatrix& w, const void* act, int64_t n, float* y, int64_t ldy,
                    cudaStream_t s, int variant) {
  const bool tiles = n > kVerifyTokens && w.type != GgmlType::F32 && w.cols % kBK == 0;
  if (tiles && n >= kCublasMinTokens && gemm_uses_cublas()) {
    gemm_cublas(w, act, n, y, ldy, s);
    return;
  }
  if (tiles) {
    const dim3 grid(grid_for(w.rows, kBM), grid_for(n, kBN));
    switch (w.type) {
      case GgmlType::F16:
        launch_k(gemm_kernel<kF16, __half>, grid, kGemmThreads, 0, s, w, static_cast<const __half*>(act), n, y, ldy);
        break;
      case GgmlType::BF16:
        launch_k(gemm_kernel<kBF16, __nv_bfloat16>, grid, kGemmThreads, 0, s,
            w, static_cast<const __nv_bfloat16*>(act), n, y, ldy);
        break;
      case GgmlType::Q8_0:
        launch_k(gemm_kernel<kQ8, __half>, grid, kGemmThreads, 0, s, w, static_cast<const __half*>(act), n, y, ldy);
        break;
      case GgmlType::Q4_0:
        launch_k(gemm_kernel<kQ4, __half>, grid, kGemmThreads, 0, s, w, static_cast<const __half*>(act), n, y, ldy);
        break;
      default:
        launch_k(gemm_kernel<kKq, __half>, grid, kGemmThreads, 0, s, w, static_cast<const __half*>(act), n, y, ldy);
        break;
    }
    check_launch("gemm");
    return;
  }
  if (variant > 0 && n <= kVerifyTokens) {
    bool done = true;
    if (w.type == GgmlType::Q8_0)
      launch_matvec_chunk<kQ8>(variant, w, act, n, y, ldy, s);
    else if (w.type == GgmlType::Q4_0)
      launch_matvec_chunk<kQ4>(variant, w, act, n, y, ldy, s);
    else if (w.type == GgmlType::F16 && w.cols % 8 == 0)
      launch_matvec_chunk<kF16>(variant, w, act, n, y, ldy, s);
    else if (w.type == GgmlType::BF16 && w.cols % 8 == 0)
      launch_matvec_chunk<kBF16>(variant, w, act, n, y, ldy, s);
    else
      done = false;
    if (done) {
      check_launch("matvec");
      return;
    }
  }
  const dim3 grid(grid_for(w.rows, kMatvecThreads / 32), static_cast<unsigned>(n));
  switch (w.type) {
    case GgmlType::F32:
      if (w.cols % 4 == 0)
        launch_k(matvec_kernel<kF32>, grid, kMatvecThreads, 0, s, w, act, n, y, ldy);
      else
        launch_k(matvec_kernel<kF32s>, grid, kMatvecThreads, 0, s, w, act, n, y, ldy);
      break;
    case GgmlType::F16:
      if (w.cols % 8 == 0)
        launch_k(matvec_kernel<kF16>, grid, kMatvecThreads, 0, s, w, act, n, y, ldy);
      else
        launch_k(matvec_kernel<kF16s>, grid, kMatvecThreads, 0, s, w, act, n, y, ldy);
      break;
    case GgmlType::BF16:
      if (w.cols % 8 == 0)
        launch_k(matvec_kernel<kBF16>, grid, kMatvecThreads, 0, s, w, act, n, y, ldy);
      else
        launch_k(matvec_kernel<kBF16s>, grid, kMatvecThreads, 0, s, w, act, n, y, ldy);
      break;
    case GgmlType::Q8_0:
      launch_k(matvec_kernel<kQ8>, grid, kMatvecThreads, 0, s, w, act, n, y, ldy);
      break;
    case GgmlType::Q4_0:
      launch_k(matvec_kernel<kQ4>, grid, kMatvecThreads, 0, s, w, act, n, y, ldy);
      break;
    default:  // the file's blocks
      launch_matvec_blocks(w, static_cast<const float*>(act), n, y, ldy, s);
      break;
  }
  check_launch("matvec");
}

void embed(const DevMatrix& w, const int32_t* tokens, int n, float scale, float* x,
           cudaStream_t s) {
  launch_k(embed_kernel, dim3(grid_for(w.cols, kEmbedThreads), static_cast<unsigned>(n)),
           kEmbedThreads, 0, s, w, tokens, scale, x);
  check_launch("embed");
}

}  // namespace channel::cuda
