// The element-wise and attention kernels: RMSNorm, rope (NORMAL, NEOX, partial), the q/k/v
// stage of a layer (per-head norms, rope, K/V into the f16 cache), slot attention through a
// slot table with an online softmax (split over blocks for decode, then merged), the GLU
// activations and the logit soft-cap, and decode's fused norm/GLU + Q8_0 activation stages.
// CPU references: ops/norm.h, ops/rope.h,
// ops/attention.h, ops/activation.h.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_head_finish.cuh"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_online_softmax.cuh"

namespace channel::cuda {

namespace {

unsigned grid_for(int64_t n, int threads) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

// Row kernels (rms_norm, add_normed, norm_quant): a block of kRowThreads per row, thread k
// owning elements k, k + kRowThreads, ... (at most kPer of them), which it loads into
// registers at once. A loop that loaded one element per iteration waited for memory once per
// element: with one block per row (decode) that made norm_quant 17-25 us of a 12B layer's
// step on the H200; 256 threads with the loads up front took 8 us, 1024 threads less again
// (12B q8_0 decode 185 -> 198 t/s). The sums' order follows the thread count; it was never
// the CPU's (ops/norm.h sums in vector lanes), so CUDA and CPU agree to rounding, not bits.
constexpr int kRowThreads = 1024;

template <int kPer>
__device__ __forceinline__ void load_row(const float* row, int64_t n, float (&v)[kPer]) {
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int64_t i = threadIdx.x + static_cast<int64_t>(k) * kRowThreads;
    v[k] = i < n ? row[i] : 0.0f;
  }
}

template <int kPer>
__device__ __forceinline__ float row_scale(const float (&v)[kPer], int64_t n, float eps,
                                           float* red) {
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < kPer; ++k)
    if (threadIdx.x + static_cast<int64_t>(k) * kRowThreads < n) ss += v[k] * v[k];
  ss = block_sum(ss, red);
  return 1.0f / sqrtf(ss / static_cast<float>(n) + eps);
}

template <int kPer>
__global__ void __launch_bounds__(kRowThreads)
    rms_norm_kernel(const float* x, int64_t ldx, const float* w, int64_t n, float eps, float* y,
                    int64_t ldy) {
  float v[kPer], wv[kPer];
  load_row(w, n, wv);  // weights: no earlier grid's output, loaded while it drains
  pdl_wait();
  __shared__ float red[32];
  load_row(x + blockIdx.x * ldx, n, v);
  const float scale = row_scale(v, n, eps, red);
  float* yr = y + blockIdx.x * ldy;
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int64_t i = threadIdx.x + static_cast<int64_t>(k) * kRowThreads;
    if (i < n) yr[i] = (v[k] * scale) * wv[k];
  }
}

// resid += w ? rms_norm(x) * w : x, per row.
template <int kPer>
__global__ void __launch_bounds__(kRowThreads)
    add_normed_kernel(const float* x, const float* w, int64_t n, float eps, float* resid) {
  float v[kPer], r[kPer], wv[kPer];
  if (w) load_row(w, n, wv);  // weights: no earlier grid's output, loaded while it drains
  pdl_wait();
  __shared__ float red[32];
  load_row(x + blockIdx.x * n, n, v);
  float* rr = resid + blockIdx.x * n;
  load_row(rr, n, r);
  const float scale = w ? row_scale(v, n, eps, red) : 1.0f;
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int64_t i = threadIdx.x + static_cast<int64_t>(k) * kRowThreads;
    if (i < n) rr[i] = r[k] + (w ? (v[k] * scale) * wv[k] : v[k]);
  }
}

// The largest row the row kernels take: kRowThreads x the largest kPer below (8: four
// arrays of kPer floats a thread stay within 1024 threads' 64 registers).
constexpr int64_t kMaxRow = 8 * kRowThreads;

// Launches kernel<kPer> for the smallest kPer in {1, 2, 4, 8} that covers n.
#define CHANNEL_LAUNCH_ROW_KERNEL(kernel, n, grid, s, ...)                                     \
  do {                                                                                      \
    if ((n) > kMaxRow) /* check_model_supported refuses such models first */               \
      fail(cudaErrorInvalidValue, "a row longer than the row kernels take");                \
    const int64_t per_ = ((n) + kRowThreads - 1) / kRowThreads;                              \
    if (per_ <= 1)                                                                          \
      launch_k(kernel<1>, grid, kRowThreads, 0, s, __VA_ARGS__);                            \
    else if (per_ <= 2)                                                                     \
      launch_k(kernel<2>, grid, kRowThreads, 0, s, __VA_ARGS__);                            \
    else if (per_ <= 4)                                                                     \
      launch_k(kernel<4>, grid, kRowThreads, 0, s, __VA_ARGS__);                            \
    else                                                                                    \
      launch_k(kernel<8>, grid, kRowThreads, 0, s, __VA_ARGS__);                            \
  } while (0)

// kernel<kPer, extra> for the row length n, as CHANNEL_LAUNCH_ROW_KERNEL.
#define CHANNEL_LAUNCH_ROW_KERNEL2(kernel, extra, n, grid, s, ...)           \
  do {                                                                       \
    if ((n) > kMaxRow) /* check_model_supported refuses such models first */ \
      fail(cudaErrorInvalidValue, "a row longer than the row kernels take"); \
    const int64_t per_ = ((n) + kRowThreads - 1) / kRowThreads;              \
    if (per_ <= 1)                                                           \
      launch_k(kernel<1, extra>, grid, kRowThreads, 0, s, __VA_ARGS__);      \
    else if (per_ <= 2)                                                      \
      launch_k(kernel<2, extra>, grid, kRowThreads, 0, s, __VA_ARGS__);      \
    else if (per_ <= 4)                                                      \
      launch_k(kernel<4, extra>, grid, kRowThreads, 0, s, __VA_ARGS__);      \
    else                                                                     \
      launch_k(kernel<8, extra>, grid, kRowThreads, 0, s, __VA_ARGS__);      \
  } while (0)

// Rotates the head in v (shared or global) of token t at pos, threads over pairs.
__device__ __forceinline__ void rope_head(const RopeDev& p, int t, int32_t pos, float* v) {
  for (int i = threadIdx.x; i < p.n_rot / 2; i += blockDim.x)
    rope_pair_cs(p, rope_cs_at(p, t, pos, i), i, v);
}

// Block row y fills table y: the step's rotations, global and sliding, in one launch.
__global__ void rope_table_kernel(RopeDev p0, RopeDev p1, const int32_t* positions, int n,
                                  float2* table0, float2* table1) {
  pdl_wait();
  const RopeDev& p = blockIdx.y == 0 ? p0 : p1;
  float2* table = blockIdx.y == 0 ? table0 : table1;
  const int half = p.n_rot / 2;
  for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n * half; k += gridDim.x * blockDim.x)
    table[k] = rope_cs(p, positions[k / half], k % half);
}

__global__ void rope_kernel(RopeDev p, float* x, int64_t ldx, int head_dim,
                            const int32_t* positions) {
  pdl_wait();
  const int h = blockIdx.x, t = blockIdx.y;
  rope_head(p, t, positions[t], x + t * ldx + static_cast<int64_t>(h) * head_dim);
}

// Block per (head of q | k | v, token) of kFinishThreads threads; a head is at most 512 wide
// (the shared head below), so a thread owns at most kFinishPer of its elements.
constexpr int kFinishThreads = 128, kFinishPer = 512 / kFinishThreads;

template <typename T>
__global__ void qkv_finish_kernel(QkvLayout l, float* qkv, const float* qn, const float* kn,
                                  float eps, RopeDev rope, const int32_t* positions,
                                  const int32_t* store_slots, T* k_cache, T* v_cache,
                                  int64_t cap) {
  const int h = blockIdx.x, t = blockIdx.y;
  // This thread's norm weights (elements threadIdx.x + k * kFinishThreads of the head): no
  // earlier grid's output, so loaded while it drains.
  const float* nw = h < l.n_head ? qn : h < l.n_head + l.n_head_kv ? kn : nullptr;
  float nwv[kFinishPer] = {};
  if (nw)
#pragma unroll
    for (int k = 0; k < kFinishPer; ++k) {
      const int i = threadIdx.x + k * kFinishThreads;
      if (i < l.head_dim) nwv[k] = nw[i];
    }
  pdl_wait();
  __shared__ float head[512];
  __shared__ float red[32];
  float* row = qkv + t * l.ld;
  const int64_t slot = store_slots[t];
  if (h >= l.n_head + l.n_head_kv) {  // a value head: straight into the cache
    const int hv = h - l.n_head - l.n_head_kv;
    const float* src = row + static_cast<int64_t>(l.n_head + l.n_head_kv) * l.head_dim +
                       static_cast<int64_t>(hv) * l.head_dim_v;
    T* dst = v_cache + (hv * cap + slot) * l.head_dim_v;
    for (int i = threadIdx.x; i < l.head_dim_v; i += blockDim.x) dst[i] = to_cache<T>(src[i]);
    return;
  }
  const bool is_q = h < l.n_head;
  float* src = row + static_cast<int64_t>(h) * l.head_dim;  // k heads follow the q heads
  for (int i = threadIdx.x; i < l.head_dim; i += blockDim.x) head[i] = src[i];
  __syncthreads();
  if (nw) {  // one warp's sum, as the one-token attention that finishes its own heads
    if (threadIdx.x < 32) {
      const float scale = head_rms_scale(head, l.head_dim, eps);
      if (threadIdx.x == 0) red[0] = scale;
    }
    __syncthreads();
    const float scale = red[0];
#pragma unroll
    for (int k = 0; k < kFinishPer; ++k) {
      const int i = threadIdx.x + k * kFinishThreads;
      if (i < l.head_dim) head[i] = (head[i] * scale) * nwv[k];
    }
    __syncthreads();
  }
  rope_head(rope, t, positions[t], head);
  __syncthreads();
  if (is_q) {
    for (int i = threadIdx.x; i < l.head_dim; i += blockDim.x) src[i] = head[i];
  } else {
    T* dst = k_cache + ((h - l.n_head) * cap + slot) * l.head_dim;
    for (int i = threadIdx.x; i < l.head_dim; i += blockDim.x) dst[i] = to_cache<T>(head[i]);
  }
}

// ---- attention ------------------------------------------------------------------------------

constexpr int kMaxGroup = 8, kAttnWarps = 4;

// Block per (KV head, split, token); each warp takes every kAttnWarps-th slot of the split with
// an online softmax per query head of the group (at most G = kMaxGroup), the next slot's key
// and value loading while it scores one, then the warps merge through shared memory. (Four
// slots ahead with the group a template parameter, stop 43's opt-in, was 0.3-1.6 % slower on
// the H100, 4.8 % on the 1B shape: docs/cuda.md.)
template <int D, typename T>
__global__ void __launch_bounds__(kAttnWarps * 32) attention_kernel(AttnArgs a) {
  pdl_wait();
  constexpr int HD = D * 32, G = kMaxGroup;
  __shared__ float sm_o[kAttnWarps][G][HD];
  __shared__ float sm_m[kAttnWarps][G], sm_l[kAttnWarps][G];
  const int hk = blockIdx.x, split = blockIdx.y, t = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = a.n_head / a.n_head_kv;
  const int first = a.first[t], count = a.count[t];
  const int per = (count + a.splits - 1) / a.splits;
  const int j0 = split * per, j1 = min(count, j0 + per);

  float q[G][D], o[G][D], m[G], l[G];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
#pragma unroll
    for (int d = 0; d < D; ++d) {
      o[g][d] = 0.0f;
      q[g][d] = g < group ? a.q[t * a.ldq + static_cast<int64_t>(hk * group + g) * HD + lane * D + d]
                          : 0.0f;
    }
  }
  const T* kb = static_cast<const T*>(a.k_cache) + hk * a.cap * HD;
  const T* vb = static_cast<const T*>(a.v_cache) + hk * a.cap * HD;
  score_slots_ahead<D, G, kAttnWarps, 1>([&](int j) { return a.table[first + j]; }, j0 + warp, j1,
                                         kb, vb, lane, q, group, a.scale, o, m, l);
  online_softmax_merge(a, hk, split, t, group, o, m, l, sm_o, sm_m, sm_l);
}

// The slot kernel for a head of D * 32 over an f16 or f32 cache.
template <int D>
void launch_attention(const AttnArgs& a, dim3 grid, int threads, cudaStream_t s) {
  if (a.kv_f32)
    launch_k(attention_kernel<D, float>, grid, threads, 0, s, a);
  else
    launch_k(attention_kernel<D, __half>, grid, threads, 0, s, a);
}

// Block per (query head, token): merges the splits' (O, max, L). The splits' weights
// exp(max_s - max) and their L go through shared memory once, computed by one thread per split;
// each output element then sums over the splits in split order, as the CPU merge does, leaving
// out splits of weight 0 (empty ones). (A
// loop that read every split's max and L again for every element was 14 us of a 12B layer on
// the H200 with 33 splits.) One thread per output element, its splits' loads 16 deep.
constexpr int kMaxSplits = 64;  // attention_splits' bound

// A thread per output element, and at least one per split (and a warp's worth).
unsigned merge_threads(int head_dim_v) {
  return static_cast<unsigned>((std::max(head_dim_v, kMaxSplits) + 31) / 32 * 32);
}

__global__ void attention_merge_kernel(AttnArgs a) {
  pdl_wait();
  __shared__ float weight[kMaxSplits], sum[kMaxSplits], red[32];
  const int h = blockIdx.x, t = blockIdx.y, hd = a.head_dim_v;
  const float* part = a.part + (static_cast<int64_t>(t) * a.n_head + h) * a.splits * (hd + 2);
  const int s_own = threadIdx.x;  // the split this thread reads the max and L of
  const float m_own = s_own < a.splits ? part[s_own * (hd + 2) + hd] : -INFINITY;
  const float l_own = s_own < a.splits ? part[s_own * (hd + 2) + hd + 1] : 0.0f;
  // The largest max: exact in any order. block_sum's pattern with fmaxf.
  float mx = m_own;
  for (int o = 16; o > 0; o /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = mx;
  __syncthreads();
  mx = -INFINITY;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) mx = fmaxf(mx, red[w]);
  if (s_own < a.splits) {
    weight[s_own] = m_own == -INFINITY ? 0.0f : expf(m_own - mx);
    sum[s_own] = l_own;
  }
  __syncthreads();
  float L = 0.0f;
  if (mx != -INFINITY)
    for (int s = 0; s < a.splits; ++s)
      if (weight[s] != 0.0f) L += sum[s] * weight[s];
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    float O = 0.0f;
    if (mx != -INFINITY) {
      // An empty split (no slots, or all far below the max) has weight 0: not read.
#pragma unroll 16
      for (int s = 0; s < a.splits; ++s)
        if (weight[s] != 0.0f) O += part[s * (hd + 2) + d] * weight[s];
    }
    // A warp holds 32 consecutive elements of a head: one Q8_0 block of out_act.
    store_output(a, (static_cast<int64_t>(t) * a.n_head + h) * hd + d,
                 static_cast<int64_t>(a.n_head) * hd, L > 0.0f ? O / L : 0.0f);
  }
}

// ---- activations ----------------------------------------------------------------------------

__device__ __forceinline__ float gelu_f16_table(float x) {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  const float xh = __half2float(__float2half_rn(x));
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  constexpr float kCoef = 0.044715f;
  const float inner = __fmul_rn(__fmul_rn(kSqrt2OverPi, xh),
                                __fadd_rn(1.0f, __fmul_rn(__fmul_rn(kCoef, xh), xh)));
  const float g = __fmul_rn(__fmul_rn(0.5f, xh), __fadd_rn(1.0f, tanhf(inner)));
  return __half2float(__float2half_rn(g));
}

__global__ void glu_kernel(const float* gu, int64_t ld, int64_t n_ff, bool gelu, float* out) {
  pdl_wait();
  const int64_t t = blockIdx.y;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n_ff;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = gu[t * ld + i], u = gu[t * ld + n_ff + i];
    out[t * n_ff + i] = gelu ? gelu_f16_table(g) * u : g / (1.0f + expf(-g)) * u;
  }
}

// ---- decode's fused activation stages (norm_quant, glu_quant) -----------------------------------

// A block per row of n with kRowThreads threads, as add_normed_kernel and rms_norm_kernel,
// whose expressions it repeats: thread k owns elements k, k + kRowThreads, ...
template <int kPer, int F>
__global__ void __launch_bounds__(kRowThreads)
    norm_quant_kernel(const float* proj, const float* post_w, float* resid, const float* norm_w,
                      int64_t n, float eps, void* out, float* d) {
  // Everything the block reads is loaded up front: a load left inside the quantizing loop
  // waited behind each element's warp shuffles (12-18 us a call on the H200). The norms'
  // weights are no earlier grid's output: loaded while it drains.
  float r[kPer], nw[kPer], pw[kPer];
  load_row(norm_w, n, nw);
  if (proj && post_w) load_row(post_w, n, pw);
  pdl_wait();
  __shared__ float red[32];
  float* rr = resid + blockIdx.x * n;
  load_row(rr, n, r);
  if (proj) {
    float p[kPer];
    load_row(proj + blockIdx.x * n, n, p);
    const float scale = post_w ? row_scale(p, n, eps, red) : 1.0f;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int64_t i = threadIdx.x + static_cast<int64_t>(k) * kRowThreads;
      if (i < n) {
        r[k] += post_w ? (p[k] * scale) * pw[k] : p[k];
        rr[i] = r[k];
      }
    }
  }
  const float scale = row_scale(r, n, eps, red);
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int64_t i = threadIdx.x + static_cast<int64_t>(k) * kRowThreads;
    if (i < n) act_store<F>((r[k] * scale) * nw[k], blockIdx.x * n + i, out, d);
  }
}

template <int F>
__global__ void glu_quant_kernel(const float* gu, int64_t ld, int64_t n_ff, bool gelu, void* out,
                                 float* d) {
  pdl_wait();
  const int64_t t = blockIdx.y;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n_ff;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = gu[t * ld + i], u = gu[t * ld + n_ff + i];
    act_store<F>(gelu ? gelu_f16_table(g) * u : g / (1.0f + expf(-g)) * u, t * n_ff + i, out, d);
  }
}

__global__ void softcap_kernel(float* x, int64_t count, float cap) {
  pdl_wait();
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    x[i] = cap * tanhf(x[i] / cap);
}

// Block b of kNonfiniteBlocks looks at its contiguous share of x and writes flags[b] (1 where
// an exponent is all ones: NaN or Inf), every block every launch, so nothing is cleared first.
__global__ void nonfinite_flags_kernel(const float* x, int64_t count, uint32_t* flags) {
  pdl_wait();
  const int64_t share = (count + gridDim.x - 1) / gridDim.x;
  const int64_t lo = blockIdx.x * share, hi = lo + share < count ? lo + share : count;
  const auto* bits = reinterpret_cast<const uint32_t*>(x);
  uint32_t bad = 0;
  for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x)
    bad |= static_cast<uint32_t>((bits[i] & 0x7f800000u) == 0x7f800000u);
  bad = static_cast<uint32_t>(__syncthreads_or(static_cast<int>(bad)));
  if (threadIdx.x == 0) flags[blockIdx.x] = bad;
}

}  // namespace

RopeDev make_rope(RopeMode mode, int n_rot, float base, float freq_scale,
                  const float* freq_factors_dev) {
  RopeDev r;
  r.mode = mode;
  r.n_rot = n_rot;
  r.theta_scale = std::pow(base, -2.0f / static_cast<float>(n_rot));
  r.freq_scale = freq_scale;
  r.freq_factors = freq_factors_dev;
  return r;
}

void rms_norm(const float* x, int64_t ldx, const float* w, int64_t rows, int64_t n, float eps,
              float* y, int64_t ldy, cudaStream_t s) {
  CHANNEL_LAUNCH_ROW_KERNEL(rms_norm_kernel, n, static_cast<unsigned>(rows), s, x, ldx, w, n, eps,
                            y, ldy);
  check_launch("rms_norm");
}

void add_normed(const float* x, const float* norm_w, int64_t rows, int64_t n, float eps,
                float* resid, cudaStream_t s) {
  CHANNEL_LAUNCH_ROW_KERNEL(add_normed_kernel, n, static_cast<unsigned>(rows), s, x, norm_w, n, eps,
                            resid);
  check_launch("add_normed");
}

void rope_tables(const RopeDev& p0, const RopeDev& p1, const int32_t* positions, int n,
                 float2* table0, float2* table1, cudaStream_t s) {
  const int count = n * std::max(p0.n_rot / 2, table1 ? p1.n_rot / 2 : 0);
  if (count == 0) return;
  const unsigned blocks = grid_for(count, 128) < 132 ? grid_for(count, 128) : 132;
  RopeDev c0 = p0, c1 = p1;
  c0.table = c1.table = nullptr;
  launch_k(rope_table_kernel, dim3(blocks, table1 ? 2u : 1u), 128, 0, s, c0, c1, positions, n,
           table0, table1);
  check_launch("rope_table");
}

void rope_table(const RopeDev& p, const int32_t* positions, int n, float2* table, cudaStream_t s) {
  rope_tables(p, p, positions, n, table, nullptr, s);
}

void rope(const RopeDev& p, float* x, int64_t ldx, int n, int n_heads, int head_dim,
          const int32_t* positions, cudaStream_t s) {
  launch_k(rope_kernel, dim3(static_cast<unsigned>(n_heads), static_cast<unsigned>(n)), 64, 0, s,
      p, x, ldx, head_dim, positions);
  check_launch("rope");
}

void qkv_finish(const QkvLayout& l, float* qkv, int n, const float* qn, const float* kn,
                float eps, const RopeDev& rope, const int32_t* positions,
                const int32_t* store_slots, void* k_cache, void* v_cache, int64_t cap,
                cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>(l.n_head + 2 * l.n_head_kv), static_cast<unsigned>(n));
  if (l.kv_f32)
    launch_k(qkv_finish_kernel<float>, grid, kFinishThreads, 0, s, l, qkv, qn, kn, eps, rope,
             positions, store_slots, static_cast<float*>(k_cache), static_cast<float*>(v_cache),
             cap);
  else
    launch_k(qkv_finish_kernel<__half>, grid, kFinishThreads, 0, s, l, qkv, qn, kn, eps, rope,
             positions, store_slots, static_cast<__half*>(k_cache), static_cast<__half*>(v_cache),
             cap);
  check_launch("qkv_finish");
}

int64_t row_kernels_max_row() { return kMaxRow; }

size_t attention_part_floats(int n, int n_head, int head_dim_v, int splits) {
  return static_cast<size_t>(n) * n_head * splits * (head_dim_v + 2);
}

bool attention_shape_supported(int head_dim, int head_dim_v, int group) {
  return head_dim == head_dim_v && head_dim % 32 == 0 && head_dim >= 32 && head_dim <= 256 &&
         group >= 1 && group <= kMaxGroup;
}

void attention(const AttnArgs& a, cudaStream_t s) {
  if (a.n >= kFlashMinTokens && flash_attention_supported(a) && flash_attention_enabled()) {
    flash_attention(a, s);
    return;
  }
  const dim3 grid(static_cast<unsigned>(a.n_head_kv), static_cast<unsigned>(a.splits),
                  static_cast<unsigned>(a.n));
  const int threads = kAttnWarps * 32;
  with_lane_elements(a.head_dim, [&](auto d) {  // attention_shape_supported's sizes
    launch_attention<decltype(d)::value>(a, grid, threads, s);
  });
  check_launch("attention");
  finish_attention(a.part, a.n, a.n_head, a.head_dim_v, a.splits, a.out, a.out_act, a.out_form, s);
}

void finish_attention(const float* part, int n, int n_head, int head_dim_v, int splits, float* out,
                      void* out_act, ActForm out_form, cudaStream_t s) {
  if (splits <= 1) return;  // the attention kernel wrote out (or out_act)
  AttnArgs a;
  a.part = const_cast<float*>(part);
  a.n = n;
  a.n_head = n_head;
  a.head_dim_v = head_dim_v;
  a.splits = splits;
  a.out = out;
  a.out_act = out_act;
  a.out_form = out_form;
  if (splits > kMaxSplits) fail(cudaErrorInvalidValue, "attention split over more than 64 blocks");
  launch_k(attention_merge_kernel, dim3(static_cast<unsigned>(n_head), static_cast<unsigned>(n)),
           merge_threads(head_dim_v), 0, s, a);
  check_launch("attention_merge");
}

void glu(const float* gu, int64_t ld, int n, int64_t n_ff, bool gelu, float* out,
         cudaStream_t s) {
  const unsigned gx = grid_for(n_ff, 256) < 64 ? grid_for(n_ff, 256) : 64;
  launch_k(glu_kernel, dim3(gx, static_cast<unsigned>(n)), 256, 0, s, gu, ld, n_ff, gelu, out);
  check_launch("glu");
}

ActForm act_form(GgmlType type) {
  switch (type) {
    case GgmlType::Q8_0:
    case GgmlType::Q4_0:
      return ActForm::q8;
    case GgmlType::F16:
      return ActForm::f16;
    case GgmlType::BF16:
      return ActForm::bf16;
    default:
      return ActForm::f32;
  }
}

namespace {

// fn(std::integral_constant<int, F>) for the form f: the kernels take their form as a
// template argument.
template <typename Fn>
void with_form(ActForm f, Fn&& fn) {
  switch (f) {
    case ActForm::q8:
      return fn(std::integral_constant<int, 0>{});
    case ActForm::f16:
      return fn(std::integral_constant<int, 1>{});
    case ActForm::bf16:
      return fn(std::integral_constant<int, 2>{});
    case ActForm::f32:
      return fn(std::integral_constant<int, 3>{});
  }
}

}  // namespace

void norm_quant(const float* proj, const float* post_w, float* resid, const float* norm_w,
                int64_t rows, int64_t n, float eps, GgmlType type, void* out, cudaStream_t s) {
  float* d = reinterpret_cast<float*>(static_cast<int8_t*>(out) + rows * n);  // Q8_0's scales
  const auto grid = static_cast<unsigned>(rows);
  with_form(act_form(type), [&](auto form) {
    constexpr int F = decltype(form)::value;
    CHANNEL_LAUNCH_ROW_KERNEL2(norm_quant_kernel, F, n, grid, s, proj, post_w, resid, norm_w, n,
                               eps, out, d);
  });
  check_launch("norm_quant");
}

void glu_quant(const float* gu, int64_t ld, int n, int64_t n_ff, bool gelu, GgmlType type,
               void* out, cudaStream_t s) {
  float* d = reinterpret_cast<float*>(static_cast<int8_t*>(out) + n * n_ff);  // Q8_0's scales
  const dim3 grid(grid_for(n_ff, 256) < 64 ? grid_for(n_ff, 256) : 64, static_cast<unsigned>(n));
  with_form(act_form(type), [&](auto form) {
    launch_k(glu_quant_kernel<decltype(form)::value>, grid, 256, 0, s, gu, ld, n_ff, gelu, out, d);
  });
  check_launch("glu_quant");
}

void softcap(float* x, int64_t count, float cap, cudaStream_t s) {
  launch_k(softcap_kernel, grid_for(count, 256) < 1024 ? grid_for(count, 256) : 1024, 256, 0, s,
      x, count, cap);
  check_launch("softcap");
}

void nonfinite_flags(const float* x, int64_t count, uint32_t* flags, cudaStream_t s) {
  launch_k(nonfinite_flags_kernel, kNonfiniteBlocks, 256, 0, s, x, count, flags);
  check_launch("nonfinite_flags");
}

bool any_nonfinite(const uint32_t* flags) {
  uint32_t bad = 0;
  for (int b = 0; b < kNonfiniteBlocks; ++b) bad |= flags[b];
  return bad != 0;
}

}  // namespace channel::cuda
