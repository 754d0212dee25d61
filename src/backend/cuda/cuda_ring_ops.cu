// The slot ring's kernels: the K/V store of a layer (keys rotated at their clocks with f64
// angles, queries left unrotated), slot attention through the active-slot table with one
// query rotation per run, and the scatter of token-major f16 rows (recall episodes) into an
// arena. CPU references: RingSession::Backend (runtime/ring_session.cpp), slot_attention_ref
// (kv/slot_attention.h), ops/rope.h rope_cos_sin / rope_rotate.
#include <cmath>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_head_finish.cuh"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_online_softmax.cuh"

namespace channel::cuda {

namespace {

constexpr int kMaxGroup = 8, kWarps = 4;

// cos/sin of pair i at pos, as rope_cos_sin: the angle in double, each rounded once to f32.
__device__ __forceinline__ float2 ring_cs(const RingRope& r, double pos, int i) {
  double s, c;
  sincos(pos * r.inv_freq[i], &s, &c);
  return make_float2(static_cast<float>(c), static_cast<float>(s));
}

// Element d of head x rotated by cs (shared [n_rot/2]); dimensions >= n_rot unchanged.
__device__ __forceinline__ float rotated(const RingRope& r, const float2* cs, const float* x,
                                         int d) {
  if (d >= r.n_rot) return x[d];
  const int half = r.n_rot / 2;
  int i, a, b;
  if (r.neox) {
    i = d < half ? d : d - half;
    a = i;
    b = i + half;
  } else {
    i = d / 2;
    a = 2 * i;
    b = 2 * i + 1;
  }
  const float2 c = cs[i];
  const float xa = x[a], xb = x[b];
  return d == a ? __fsub_rn(__fmul_rn(xa, c.x), __fmul_rn(xb, c.y))
                : __fadd_rn(__fmul_rn(xa, c.y), __fmul_rn(xb, c.x));
}

// Block per (head of q | k | v, token).
template <typename T>
__global__ void ring_qkv_finish_kernel(QkvLayout l, float* qkv, const float* qn, const float* kn,
                                       float eps, RingRope rope, const double* key_pos,
                                       const int32_t* slots, T* k_cache, T* v_cache, int64_t cap) {
  pdl_wait();
  __shared__ float head[512];
  __shared__ float2 cs[256];
  __shared__ float red[32];
  const int h = blockIdx.x, t = blockIdx.y;
  float* row = qkv + t * l.ld;
  const int64_t slot = slots[t];
  if (h >= l.n_head + l.n_head_kv) {  // a value head: straight into the arena
    const int hv = h - l.n_head - l.n_head_kv;
    const float* src = row + static_cast<int64_t>(l.n_head + l.n_head_kv) * l.head_dim +
                       static_cast<int64_t>(hv) * l.head_dim_v;
    T* dst = v_cache + (hv * cap + slot) * l.head_dim_v;
    for (int i = threadIdx.x; i < l.head_dim_v; i += blockDim.x) dst[i] = to_cache<T>(src[i]);
    return;
  }
  const bool is_q = h < l.n_head;
  float* src = row + static_cast<int64_t>(h) * l.head_dim;  // k heads follow the q heads
  const float* nw = is_q ? qn : kn;
  for (int i = threadIdx.x; i < l.head_dim; i += blockDim.x) head[i] = src[i];
  __syncthreads();
  if (nw) {
    float ss = 0.0f;
    for (int i = threadIdx.x; i < l.head_dim; i += blockDim.x) ss += head[i] * head[i];
    ss = block_sum(ss, red);
    const float scale = 1.0f / sqrtf(ss / static_cast<float>(l.head_dim) + eps);
    for (int i = threadIdx.x; i < l.head_dim; i += blockDim.x) head[i] = (head[i] * scale) * nw[i];
    __syncthreads();
  }
  if (is_q) {  // queries are rotated per run by the attention
    for (int i = threadIdx.x; i < l.head_dim; i += blockDim.x) src[i] = head[i];
    return;
  }
  for (int i = threadIdx.x; i < rope.n_rot / 2; i += blockDim.x)
    cs[i] = ring_cs(rope, key_pos[t], i);
  __syncthreads();
  T* dst = k_cache + ((h - l.n_head) * cap + slot) * l.head_dim;
  for (int i = threadIdx.x; i < l.head_dim; i += blockDim.x)
    dst[i] = to_cache<T>(rotated(rope, cs, head, i));
}

template <int D>
__device__ __forceinline__ void load_row(const float* p, float* out) {
#pragma unroll
  for (int i = 0; i < D; ++i) out[i] = p[i];
}

template <int D>
__device__ __forceinline__ void load_row(const __half* p, float* out) {
#pragma unroll
  for (int i = 0; i < D; ++i) out[i] = __half2float(p[i]);
}

// Block per (KV head, split, token). The query's keys (its runs, concatenated) are split
// evenly over the splits; in each run the block rotates its query heads into shared memory,
// then each warp takes every kWarps-th slot of the run with an online softmax per query head
// (at most G = kMaxGroup), and the warps merge through shared memory at the end. (Loading the
// next 4 slots of a run while scoring one, stop 43's opt-in, decoded no faster on the H100.)
template <int D, typename T>
__global__ void __launch_bounds__(kWarps * 32) ring_attention_kernel(RingAttnArgs a) {
  pdl_wait();
  constexpr int HD = D * 32, G = kMaxGroup;
  __shared__ float sm_o[kWarps][G][HD];
  __shared__ float sm_m[kWarps][G], sm_l[kWarps][G];
  __shared__ float sm_q[G][HD];
  __shared__ float2 sm_cs[HD / 2];
  const int hk = blockIdx.x, split = blockIdx.y, t = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = a.n_head / a.n_head_kv;
  const RingRun* runs = a.runs + a.run_first[t];
  const int n_runs = a.run_count[t];
  int total = 0;
  for (int r = 0; r < n_runs; ++r) total += runs[r].count;
  const int per = (total + a.splits - 1) / a.splits;
  const int j0 = split * per, j1 = min(total, j0 + per);

  float q[G][D], o[G][D], m[G], l[G];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
#pragma unroll
    for (int d = 0; d < D; ++d) o[g][d] = 0.0f;
  }
  const float* qt = a.q + t * a.ldq + static_cast<int64_t>(hk) * group * HD;
  const T* kb = static_cast<const T*>(a.k_cache) + hk * a.cap * HD;
  const T* vb = static_cast<const T*>(a.v_cache) + hk * a.cap * HD;
  int base = 0;
  for (int r = 0; r < n_runs; ++r) {
    const RingRun run = runs[r];
    const int rb = base;
    base += run.count;
    const int s0 = max(j0, rb), s1 = min(j1, rb + run.count);
    if (s0 >= s1) continue;  // the same for the whole block
    __syncthreads();         // the previous run's query is read
    for (int i = threadIdx.x; i < a.rope.n_rot / 2; i += blockDim.x)
      sm_cs[i] = ring_cs(a.rope, run.pos, i);
    __syncthreads();
    for (int idx = threadIdx.x; idx < group * HD; idx += blockDim.x) {
      const int g = idx / HD, d = idx % HD;
      sm_q[g][d] = rotated(a.rope, sm_cs, qt + g * HD, d);
    }
    __syncthreads();
#pragma unroll
    for (int g = 0; g < G; ++g)
#pragma unroll
      for (int d = 0; d < D; ++d) q[g][d] = g < group ? sm_q[g][lane * D + d] : 0.0f;
    const int32_t* ids = a.table + run.first;  // ids[j - rb]: the slot of key j
    for (int j = s0 + warp; j < s1; j += kWarps) {
      const int64_t slot = ids[j - rb];
      float kv[D], vv[D];
      load_row<D>(kb + slot * HD + lane * D, kv);
      load_row<D>(vb + slot * HD + lane * D, vv);
      online_softmax_add(q, kv, vv, group, a.scale, o, m, l);
    }
  }
  online_softmax_merge(a, hk, split, t, group, o, m, l, sm_o, sm_m, sm_l);
}

// The ring's slot kernel for a head of D * 32 over an f16 or f32 arena.
template <int D>
void launch_ring_attention(const RingAttnArgs& a, dim3 grid, int threads, cudaStream_t s) {
  if (a.kv_f32)
    launch_k(ring_attention_kernel<D, float>, grid, threads, 0, s, a);
  else
    launch_k(ring_attention_kernel<D, __half>, grid, threads, 0, s, a);
}

// An f16 value into an arena of T (widened for an f32 arena).
template <typename T>
__device__ __forceinline__ void put(T* p, __half x) {
  if constexpr (sizeof(T) == 2)
    *p = x;
  else
    *p = __half2float(x);
}

// Block per (kEpisodeTokens tokens, plane). A key plane turned by delta: each key widened,
// turned in f32 by the block's angles (computed once: they depend on delta only) and rounded
// back to f16 (nearest even); otherwise the rows as they are.
constexpr int kEpisodeTokens = 16;

// Rotation pair (xa, xb) by c = (cos, sin), rounded to f16 as the host's rehydration does.
__device__ __forceinline__ void turn_pair(__half& xa, __half& xb, float2 c) {
  const float a = __half2float(xa), b = __half2float(xb);
  xa = __float2half_rn(__fsub_rn(__fmul_rn(a, c.x), __fmul_rn(b, c.y)));
  xb = __float2half_rn(__fadd_rn(__fmul_rn(a, c.y), __fmul_rn(b, c.x)));
}

// In 16-byte pieces of the f16 rows (stored as they are, or widened for an f32 arena): a row of a
// plane is `units` units, a unit one piece (as stored, or four adjacent pairs turned: NORMAL) or,
// NEOX, two pieces half a rotation apart whose eight pairs are turned together. A thread loads its
// next kEpisodeBatch units before it turns and stores them: one wait for memory instead of one a
// unit (the element-wise loop took ~38 us for a 12.6 MB episode, latency-bound).
constexpr int kEpisodeBatch = 4;
template <typename T>
__device__ __forceinline__ void put8(T* out, const uint4& v) {  // 8 halves, 16-byte aligned
  if constexpr (sizeof(T) == 2) {
    *reinterpret_cast<uint4*>(out) = v;
  } else {
    const auto* h = reinterpret_cast<const __half*>(&v);
    reinterpret_cast<float4*>(out)[0] =
        make_float4(__half2float(h[0]), __half2float(h[1]), __half2float(h[2]), __half2float(h[3]));
    reinterpret_cast<float4*>(out)[1] =
        make_float4(__half2float(h[4]), __half2float(h[5]), __half2float(h[6]), __half2float(h[7]));
  }
}

template <typename T>
__device__ void write_episode_pieces(const __half* src_plane, T* base, int64_t cap, int64_t first,
                                     int t0, int heads, int n_head_kv, int head_dim, bool turn,
                                     const RingRope& rope, const float2* cs) {
  const int width = n_head_kv * head_dim, half = rope.n_rot / 2;
  // Units of a row: turned NEOX pairs of pieces, then pieces as stored (or turned in place).
  const int pair_units = turn && rope.neox ? rope.n_rot / 16 : 0;
  const int units = pair_units + (head_dim - 2 * 8 * pair_units) / 8;
  auto offsets = [&](int idx, int* at, int* at2) {  // a unit's first piece (and second: NEOX)
    const int u = idx % units;
    *at = u < pair_units ? 8 * u : rope.n_rot * (pair_units > 0) + 8 * (u - pair_units);
    *at2 = u < pair_units ? *at + half : -1;
  };
  auto row_in = [&](int th) {
    return src_plane + static_cast<int64_t>(t0 + th / n_head_kv) * width +
           (th % n_head_kv) * head_dim;
  };
  auto row_out = [&](int th) {
    return base +
           (static_cast<int64_t>(th % n_head_kv) * cap + first + t0 + th / n_head_kv) * head_dim;
  };
  const int total = heads * units;
  for (int i0 = threadIdx.x; i0 < total; i0 += kEpisodeBatch * blockDim.x) {
    uint4 a[kEpisodeBatch], b[kEpisodeBatch];
    int at_k[kEpisodeBatch], at2_k[kEpisodeBatch];
    const int count = min(kEpisodeBatch, (total - i0 + blockDim.x - 1) / blockDim.x);
#pragma unroll
    for (int k = 0; k < kEpisodeBatch; ++k) {
      if (k >= count) break;
      offsets(i0 + k * blockDim.x, &at_k[k], &at2_k[k]);
      const __half* x = row_in((i0 + k * blockDim.x) / units);
      a[k] = *reinterpret_cast<const uint4*>(x + at_k[k]);
      if (at2_k[k] >= 0) b[k] = *reinterpret_cast<const uint4*>(x + at2_k[k]);
    }
#pragma unroll
    for (int k = 0; k < kEpisodeBatch; ++k) {
      if (k >= count) break;
      const int at = at_k[k], at2 = at2_k[k];
      T* out = row_out((i0 + k * blockDim.x) / units);
      auto* ha = reinterpret_cast<__half*>(&a[k]);
      if (at2 >= 0) {  // NEOX: pairs (at + i, at + half + i)
        auto* hb = reinterpret_cast<__half*>(&b[k]);
#pragma unroll
        for (int i = 0; i < 8; ++i) turn_pair(ha[i], hb[i], cs[at + i]);
        put8(out + at2, b[k]);
      } else if (turn && !rope.neox && at < rope.n_rot) {  // NORMAL: pairs (2j, 2j + 1)
#pragma unroll
        for (int i = 0; i < 4; ++i) turn_pair(ha[2 * i], ha[2 * i + 1], cs[at / 2 + i]);
      }
      put8(out + at, a[k]);
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(256)
    write_episode_kernel(const __half* rows, int first_plane, int n, int n_head_kv, int head_dim,
                         const EpisodeDst* dst, int64_t first, RingRope rope, double delta) {
  pdl_wait();
  __shared__ float2 cs[128];
  const int plane = first_plane + static_cast<int>(blockIdx.y), g = plane / 2, kv = plane % 2;
  const int width = n_head_kv * head_dim;
  const EpisodeDst d = dst[g];
  T* base = static_cast<T*>(kv == 0 ? d.k : d.v);
  const int t0 = blockIdx.x * kEpisodeTokens, t1 = min(t0 + kEpisodeTokens, n);
  const int heads = (t1 - t0) * n_head_kv;  // (token, head) rows of this block
  const __half* src = rows + static_cast<int64_t>(plane) * n * width;
  const bool turn = kv == 0 && delta != 0.0;  // the same for the whole block
  if (turn) {
    for (int i = threadIdx.x; i < rope.n_rot / 2; i += blockDim.x) cs[i] = ring_cs(rope, delta, i);
    __syncthreads();
  }
  // The pieces path where every row and unit is 16-byte aligned.
  if (head_dim % 8 == 0 && (!turn || rope.n_rot % 16 == 0) &&
      reinterpret_cast<uintptr_t>(base) % 16 == 0 && reinterpret_cast<uintptr_t>(src) % 16 == 0) {
    write_episode_pieces(src, base, d.cap, first, t0, heads, n_head_kv, head_dim, turn, rope, cs);
    return;
  }
  auto row_in = [&](int th) {
    return src + static_cast<int64_t>(t0 + th / n_head_kv) * width + (th % n_head_kv) * head_dim;
  };
  auto row_out = [&](int th) {
    return base +
           (static_cast<int64_t>(th % n_head_kv) * d.cap + first + t0 + th / n_head_kv) * head_dim;
  };
  if (turn) {  // a thread per rotation pair (and per dimension past n_rot) of a token's head
    const int half = rope.n_rot / 2, per_head = half + (head_dim - rope.n_rot);
    for (int idx = threadIdx.x; idx < heads * per_head; idx += blockDim.x) {
      const int j = idx % per_head, th = idx / per_head;
      const __half* x = row_in(th);
      T* out = row_out(th);
      if (j >= half) {  // past the rotated dimensions: as stored
        put(out + rope.n_rot + (j - half), x[rope.n_rot + (j - half)]);
        continue;
      }
      const int a = rope.neox ? j : 2 * j, b = rope.neox ? j + half : 2 * j + 1;
      __half xa = x[a], xb = x[b];
      turn_pair(xa, xb, cs[j]);
      put(out + a, xa);
      put(out + b, xb);
    }
    return;
  }
  for (int idx = threadIdx.x; idx < heads * head_dim; idx += blockDim.x) {
    const int i = idx % head_dim, th = idx / head_dim;
    put(row_out(th) + i, row_in(th)[i]);
  }
}

}  // namespace

void write_episode_f16(const uint16_t* rows, int first_plane, int n_planes, int n, int n_head_kv,
                       int head_dim, const EpisodeDst* dst, int64_t first, bool kv_f32,
                       const RingRope& rope, double delta, cudaStream_t s) {
  if (n_planes <= 0) return;
  const dim3 grid(static_cast<unsigned>((n + kEpisodeTokens - 1) / kEpisodeTokens),
                  static_cast<unsigned>(n_planes));
  const auto* src = reinterpret_cast<const __half*>(rows);
  if (kv_f32)
    launch_k(write_episode_kernel<float>, grid, 256, 0, s, src, first_plane, n, n_head_kv, head_dim,
             dst, first, rope, delta);
  else
    launch_k(write_episode_kernel<__half>, grid, 256, 0, s, src, first_plane, n, n_head_kv,
             head_dim, dst, first, rope, delta);
  check_launch("write_episode_f16");
}

void ring_qkv_finish(const QkvLayout& l, float* qkv, int n, const float* qn, const float* kn,
                     float eps, const RingRope& rope, const double* key_pos, const int32_t* slots,
                     void* k_cache, void* v_cache, int64_t cap, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>(l.n_head + 2 * l.n_head_kv), static_cast<unsigned>(n));
  if (l.kv_f32)
    launch_k(ring_qkv_finish_kernel<float>, grid, 128, 0, s, l, qkv, qn, kn, eps, rope, key_pos,
             slots, static_cast<float*>(k_cache), static_cast<float*>(v_cache), cap);
  else
    launch_k(ring_qkv_finish_kernel<__half>, grid, 128, 0, s, l, qkv, qn, kn, eps, rope, key_pos,
             slots, static_cast<__half*>(k_cache), static_cast<__half*>(v_cache), cap);
  check_launch("ring_qkv_finish");
}

void ring_attention(const RingAttnArgs& a, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>(a.n_head_kv), static_cast<unsigned>(a.splits),
                  static_cast<unsigned>(a.n));
  const int threads = kWarps * 32;
  with_lane_elements(a.head_dim, [&](auto d) {  // attention_shape_supported's sizes
    launch_ring_attention<decltype(d)::value>(a, grid, threads, s);
  });
  check_launch("ring_attention");
  finish_attention(a.part, a.n, a.n_head, a.head_dim, a.splits, a.out, a.out_act, a.out_form, s);
}

}  // namespace channel::cuda
