// Prompt-chunk attention on tensor cores (flash_attention in cuda_kernels.h).
//
// attention_kernel (cuda_ops.cu) walks each query's slots one at a time in f32: right for a
// decode step, but a prompt chunk of 512 queries then spends most of a layer there. Here a
// block takes 64 queries of one head against the slots their ranges name, 64 keys at a time:
// S = Q K^T and O += P V through mma.sync (f16 inputs, f32 accumulators), the online softmax
// between them in registers (FlashAttention-2's schedule). The queries are rounded to f16 and
// so are the probabilities P: the same roundings a llama.cpp flash-attention prompt makes,
// and why attention() takes this path only for chunks of kFlashMinTokens or more.
//
// Keys: every query's visible slots are a range [first, first + count) of the slot table, as
// for attention_kernel. A block walks the union of its queries' ranges (split into a.splits
// parts, merged by finish_attention) and masks each score outside its own query's range.
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_online_softmax.cuh"

namespace channel::cuda {

namespace {

constexpr int kRows = 64;  // queries a block (16 a warp)
constexpr int kKeys = 64;  // keys a tile
constexpr int kWarps = kRows / 16;
constexpr int kThreads = kWarps * 32;

// Shared memory: Q, K and V tiles of f16 rows padded by 8 elements (16 bytes), so the eight
// rows a fragment load touches fall in different banks.
template <int HD>
constexpr int kLd = HD + 8;
template <int HD>
constexpr size_t smem_bytes() {
  return static_cast<size_t>(3 * kRows * kLd<HD>) * sizeof(__half) + 4 * kRows * sizeof(int);
}

__device__ __forceinline__ uint32_t pack_half2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

__device__ __forceinline__ uint32_t lds32(const __half* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

// D = A (16x16, row-major) * B (16x8, column-major) + D: f16 inputs, f32 accumulators. The
// fragments' lane layouts are the PTX ISA's for mma.m16n8k16 (g = lane / 4, c = lane % 4):
// a {row g, cols 2c..2c+1}, {row g+8, same}, {row g, cols +8}, {row g+8, cols +8};
// b {k 2c..2c+1, col g}, {k +8, col g}; d {row g, cols 2c..2c+1}, {row g+8, same}.
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // flash_attention_supported refuses such devices
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// Four 8x8 f16 matrices from shared memory, transposed: lane l names row l % 8 of matrix l / 8.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const __half* p) {
  const auto addr = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// Grid (query tiles, heads, splits). HD: head_dim = head_dim_v, a multiple of 16.
template <int HD>
__global__ void __launch_bounds__(kThreads) flash_attention_kernel(AttnArgs a) {
  extern __shared__ __align__(16) unsigned char smem[];
  constexpr int LD = kLd<HD>;
  __half* Qs = reinterpret_cast<__half*>(smem);            // [kRows][LD]
  __half* Ks = Qs + kRows * LD;                            // [kKeys][LD]
  __half* Vs = Ks + kKeys * LD;                            // [kKeys][LD]
  int* r_first = reinterpret_cast<int*>(Vs + kKeys * LD);  // [kRows] each query's range
  int* r_end = r_first + kRows;
  int* span = r_end + kRows;  // [2]: the block's union of ranges

  const int t0 = blockIdx.x * kRows, h = blockIdx.y, split = blockIdx.z;
  const int hk = h / (a.n_head / a.n_head_kv);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, c = lane % 4;

  pdl_wait();
  if (tid < kRows) {
    const int t = t0 + tid;
    const int f = t < a.n ? a.first[t] : 0, n = t < a.n ? a.count[t] : 0;
    r_first[tid] = f;
    r_end[tid] = f + n;
  }
  if (tid == 0) {
    span[0] = INT_MAX;
    span[1] = INT_MIN;
  }
  // The queries as f16, rows past the chunk zero.
  for (int i = tid; i < kRows * HD / 4; i += kThreads) {
    const int r = i / (HD / 4), d = (i % (HD / 4)) * 4;
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (t0 + r < a.n)
      v = *reinterpret_cast<const float4*>(a.q + static_cast<int64_t>(t0 + r) * a.ldq +
                                           static_cast<int64_t>(h) * HD + d);
    auto* dst = reinterpret_cast<uint32_t*>(Qs + r * LD + d);
    dst[0] = pack_half2(v.x, v.y);
    dst[1] = pack_half2(v.z, v.w);
  }
  __syncthreads();
  if (tid < kRows && r_end[tid] > r_first[tid]) {
    atomicMin(&span[0], r_first[tid]);
    atomicMax(&span[1], r_end[tid]);
  }
  __syncthreads();
  // This split's part of the union [lo, hi): empty when no query sees a slot.
  const int lo = span[0], hi = span[1];
  int j0 = 0, j1 = 0;
  if (hi > lo) {
    const int per = (hi - lo + a.splits - 1) / a.splits;
    j0 = min(hi, lo + split * per);
    j1 = min(hi, j0 + per);
  }

  // This lane's two query rows (g and g + 8 of the warp's 16) and their ranges.
  const int ra = warp * 16 + g, rb = ra + 8;
  const int fa = r_first[ra], ea = r_end[ra], fb = r_first[rb], eb = r_end[rb];
  float o[HD / 8][4];
#pragma unroll
  for (int i = 0; i < HD / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float ma = -INFINITY, mb = -INFINITY, la = 0.0f, lb = 0.0f;  // l: this lane's part

  const int64_t kv_head = static_cast<int64_t>(hk) * a.cap * HD;
  const __half* kb = static_cast<const __half*>(a.k_cache) + kv_head;
  const __half* vb = static_cast<const __half*>(a.v_cache) + kv_head;
  const __half* qrow = Qs + (warp * 16 + g) * LD + 2 * c;

  for (int kt = j0; kt < j1; kt += kKeys) {
    __syncthreads();  // the previous tile is read
    // Keys and values kt .. kt + 63 through the slot table; past j1 zero (masked below; a
    // zero value keeps 0 * garbage out of O).
    for (int i = tid; i < kKeys * HD / 8; i += kThreads) {
      const int r = i / (HD / 8), d = (i % (HD / 8)) * 8;
      int4 kv = make_int4(0, 0, 0, 0), vv = kv;
      if (kt + r < j1) {
        const int64_t slot = a.table[kt + r];
        kv = *reinterpret_cast<const int4*>(kb + slot * HD + d);
        vv = *reinterpret_cast<const int4*>(vb + slot * HD + d);
      }
      *reinterpret_cast<int4*>(Ks + r * LD + d) = kv;
      *reinterpret_cast<int4*>(Vs + r * LD + d) = vv;
    }
    __syncthreads();

    // S = Q K^T: 16 queries x 64 keys a warp, eight 16x8 tiles.
    float s[kKeys / 8][4];
#pragma unroll
    for (int nt = 0; nt < kKeys / 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < HD; kk += 16) {
      const uint32_t qa[4] = {lds32(qrow + kk), lds32(qrow + 8 * LD + kk), lds32(qrow + kk + 8),
                              lds32(qrow + 8 * LD + kk + 8)};
#pragma unroll
      for (int nt = 0; nt < kKeys / 8; ++nt) {
        const __half* krow = Ks + (nt * 8 + g) * LD + kk + 2 * c;
        mma16816(s[nt], qa, lds32(krow), lds32(krow + 8));
      }
    }

    // Scale, mask to each query's range, and the online softmax of rows a and b.
    float mxa = -INFINITY, mxb = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < kKeys / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int j = kt + nt * 8 + 2 * c + e;
        s[nt][e] = j >= fa && j < ea && j < j1 ? s[nt][e] * a.scale : -INFINITY;
        s[nt][2 + e] = j >= fb && j < eb && j < j1 ? s[nt][2 + e] * a.scale : -INFINITY;
        mxa = fmaxf(mxa, s[nt][e]);
        mxb = fmaxf(mxb, s[nt][2 + e]);
      }
#pragma unroll
    for (int off = 1; off < 4; off *= 2) {  // the four lanes of a row
      mxa = fmaxf(mxa, __shfl_xor_sync(0xffffffffu, mxa, off));
      mxb = fmaxf(mxb, __shfl_xor_sync(0xffffffffu, mxb, off));
    }
    const float na = fmaxf(ma, mxa), nb = fmaxf(mb, mxb);
    // A row that has seen no key yet keeps max -inf: its p are 0 and nothing scales.
    const float ca = na == -INFINITY ? 1.0f : expf(ma - na);
    const float cb = nb == -INFINITY ? 1.0f : expf(mb - nb);
    ma = na;
    mb = nb;
    float sa = 0.0f, sb = 0.0f;
#pragma unroll
    for (int nt = 0; nt < kKeys / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        s[nt][e] = na == -INFINITY ? 0.0f : expf(s[nt][e] - na);
        s[nt][2 + e] = nb == -INFINITY ? 0.0f : expf(s[nt][2 + e] - nb);
        sa += s[nt][e];
        sb += s[nt][2 + e];
      }
    la = la * ca + sa;
    lb = lb * cb + sb;
#pragma unroll
    for (int i = 0; i < HD / 8; ++i) {
      o[i][0] *= ca;
      o[i][1] *= ca;
      o[i][2] *= cb;
      o[i][3] *= cb;
    }

    // O += P V: P's accumulator layout is the A fragment's, two key tiles a 16-key step.
#pragma unroll
    for (int kc = 0; kc < kKeys / 16; ++kc) {
      const uint32_t pa[4] = {pack_half2(s[2 * kc][0], s[2 * kc][1]),
                              pack_half2(s[2 * kc][2], s[2 * kc][3]),
                              pack_half2(s[2 * kc + 1][0], s[2 * kc + 1][1]),
                              pack_half2(s[2 * kc + 1][2], s[2 * kc + 1][3])};
      // Matrix m of the four: keys kc*16 + (m % 2) * 8 .., columns dt*8 + (m / 2) * 8 ..
      const __half* vrow = Vs + (kc * 16 + (lane / 8 % 2) * 8 + lane % 8) * LD + (lane / 16) * 8;
#pragma unroll
      for (int dt = 0; dt < HD / 8; dt += 2) {
        uint32_t vf[4];
        ldmatrix_x4_trans(vf, vrow + dt * 8);
        mma16816(o[dt], pa, vf[0], vf[1]);
        mma16816(o[dt + 1], pa, vf[2], vf[3]);
      }
    }
  }

#pragma unroll
  for (int off = 1; off < 4; off *= 2) {
    la += __shfl_xor_sync(0xffffffffu, la, off);
    lb += __shfl_xor_sync(0xffffffffu, lb, off);
  }
  // The output through shared memory (the Q and K tiles, as f32 [kRows][LD]), so that a warp
  // stores 32 consecutive elements of one row: store_output's Q8_0 blocks need that.
  __syncthreads();
  float* Os = reinterpret_cast<float*>(smem);
  float* row_m = reinterpret_cast<float*>(r_first);  // reused: [kRows] max, [kRows] sum
  float* row_l = reinterpret_cast<float*>(r_end);
#pragma unroll
  for (int i = 0; i < HD / 8; ++i) {
    *reinterpret_cast<float2*>(Os + ra * LD + i * 8 + 2 * c) = make_float2(o[i][0], o[i][1]);
    *reinterpret_cast<float2*>(Os + rb * LD + i * 8 + 2 * c) = make_float2(o[i][2], o[i][3]);
  }
  if (c == 0) {
    row_m[ra] = ma;
    row_m[rb] = mb;
    row_l[ra] = la;
    row_l[rb] = lb;
  }
  __syncthreads();
  for (int i = tid; i < kRows * HD; i += kThreads) {
    const int r = i / HD, d = i % HD, t = t0 + r;
    if (t >= a.n) break;  // rows are in order: the rest are past the chunk too
    store_result<HD>(a, t, h, split, d, Os[r * LD + d], row_m[r], row_l[r]);
  }
}

template <int HD>
void launch_flash(const AttnArgs& a, cudaStream_t s) {
  constexpr size_t bytes = smem_bytes<HD>();
  // Above 48 KiB a kernel must ask for its shared memory, on each device: asked every launch
  // (a host call of a microsecond, against a prompt chunk's milliseconds).
  check(cudaFuncSetAttribute(flash_attention_kernel<HD>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
        "sizing the flash attention's shared memory");
  const dim3 grid(static_cast<unsigned>((a.n + kRows - 1) / kRows), static_cast<unsigned>(a.n_head),
                  static_cast<unsigned>(a.splits));
  launch_k(flash_attention_kernel<HD>, grid, kThreads, bytes, s, a);
  check_launch("flash attention");
}

}  // namespace

bool flash_attention_supported(const AttnArgs& a) {
  int device = 0, major = 0;  // mma.m16n8k16 with f16 inputs: sm_80 and later
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess)
    return false;
  return major >= 8 && !a.kv_f32 && a.head_dim == a.head_dim_v && a.head_dim % 32 == 0 &&
         a.head_dim >= 64 && a.head_dim <= 256 && a.n_head_kv > 0 && a.n_head % a.n_head_kv == 0;
}

void flash_attention(const AttnArgs& a, cudaStream_t s) {
  if (!flash_attention_supported(a)) fail(cudaErrorInvalidValue, "flash attention: shape");
  with_lane_elements(a.head_dim, [&](auto d) { launch_flash<32 * decltype(d)::value>(a, s); });
  finish_attention(a.part, a.n, a.n_head, a.head_dim_v, a.splits, a.out, a.out_act, a.out_form, s);
}

}  // namespace channel::cuda
