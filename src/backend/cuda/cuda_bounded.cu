// The bounded swa_sink_v1 layers on the device: the per-head q/k norms, the attention over the
// S sinks and the window of the last W positions (the ring before the chunk, the chunk's own
// rows after), and the ring insertion. CPU reference: bounded_attend
// (bounded/bounded_attention_core.h); the ring's state, undo history and snapshots stay with
// the session's host BoundedState, which the device ring mirrors (cuda_ring.cpp).
#include <cmath>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_kernels.h"

namespace channel::cuda {

namespace {

constexpr int kGroup = 8, kWarps = 4, kMaxDim = 256, kPerLane = kMaxDim / 32;

// Block per (q or k head, token).
__global__ void qk_head_norm_kernel(float* qkv, int64_t ld, int n_head, int head_dim,
                                    const float* qn, const float* kn, float eps) {
  pdl_wait();
  __shared__ float red[32];
  const int h = blockIdx.x, t = blockIdx.y;
  const bool is_q = h < n_head;
  const float* w = is_q ? qn : kn;
  if (!w) return;
  float* x = qkv + t * ld + static_cast<int64_t>(h) * head_dim;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < head_dim; i += blockDim.x) ss += x[i] * x[i];
  ss = block_sum(ss, red);
  const float scale = 1.0f / sqrtf(ss / static_cast<float>(head_dim) + eps);
  for (int i = threadIdx.x; i < head_dim; i += blockDim.x) x[i] = (x[i] * scale) * w[i];
}

// Block per (KV head, token): the group's query heads in shared memory; each warp takes every
// kWarps-th key of [sinks..., window Δ = 0..len-1] with an online softmax per head.
__global__ void __launch_bounds__(kWarps * 32) bounded_attention_kernel(BoundedArgs a) {
  pdl_wait();
  __shared__ float sm_q[kGroup][kMaxDim];
  __shared__ float sm_o[kWarps][kGroup][kMaxDim];
  __shared__ float sm_m[kWarps][kGroup], sm_l[kWarps][kGroup];
  const int g = blockIdx.x, t = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = a.n_head / a.n_head_kv, hd = a.head_dim;
  const int64_t seen = *a.seen;
  const int64_t pos = seen + t;
  const int len = pos + 1 < a.window ? static_cast<int>(pos + 1) : a.window;
  const float* qt = a.qkv + t * a.ld + static_cast<int64_t>(g) * group * hd;
  for (int i = threadIdx.x; i < group * hd; i += blockDim.x) sm_q[i / hd][i % hd] = qt[i];
  __syncthreads();
  const int64_t k_off = static_cast<int64_t>(a.n_head) * hd + static_cast<int64_t>(g) * hd;
  const int64_t v_off =
      static_cast<int64_t>(a.n_head + a.n_head_kv) * hd + static_cast<int64_t>(g) * hd;
  float o[kGroup][kPerLane], m[kGroup], l[kGroup];
#pragma unroll
  for (int q = 0; q < kGroup; ++q) {
    m[q] = -INFINITY;
    l[q] = 0.0f;
#pragma unroll
    for (int e = 0; e < kPerLane; ++e) o[q][e] = 0.0f;
  }
  const int rd = 2 * a.half;
  for (int idx = warp; idx < a.n_sinks + len; idx += kWarps) {
    const float *kr, *vr, *c = nullptr, *s = nullptr;
    if (idx < a.n_sinks) {  // a sink: no rotation
      kr = a.sink_k + (static_cast<int64_t>(g) * a.n_sinks + idx) * hd;
      vr = a.sink_v + (static_cast<int64_t>(g) * a.n_sinks + idx) * hd;
    } else {
      const int delta = idx - a.n_sinks;
      const int64_t j = pos - delta;
      if (j >= seen) {  // a key of this chunk
        const float* row = a.qkv + (j - seen) * a.ld;
        kr = row + k_off;
        vr = row + v_off;
      } else {
        const int64_t slot = j % a.window;
        kr = a.ring_k + (static_cast<int64_t>(g) * a.window + slot) * hd;
        vr = a.ring_v + (static_cast<int64_t>(g) * a.window + slot) * hd;
      }
      c = a.cos + static_cast<int64_t>(delta) * a.half;
      s = a.sin + static_cast<int64_t>(delta) * a.half;
    }
#pragma unroll
    for (int q = 0; q < kGroup; ++q) {  // unrolled: o, m, l stay in registers
      if (q >= group) break;
      const float* qh = sm_q[q];
      float dot = 0.0f;
      if (c) {
        for (int i = lane; i < a.half; i += 32) {
          const float q0 = qh[i], q1 = qh[i + a.half], k0 = kr[i], k1 = kr[i + a.half];
          dot += c[i] * (q0 * k0 + q1 * k1) + s[i] * (q0 * k1 - q1 * k0);
        }
        for (int d = rd + lane; d < hd; d += 32) dot += qh[d] * kr[d];
      } else {
        for (int d = lane; d < hd; d += 32) dot += qh[d] * kr[d];
      }
      const float sc = warp_sum(dot) * a.scale;
      const float mn = fmaxf(m[q], sc);
      const float cf = expf(m[q] - mn), p = expf(sc - mn);
      l[q] = l[q] * cf + p;
#pragma unroll
      for (int e = 0; e < kPerLane; ++e) {
        const int d = lane + 32 * e;
        if (d < hd) o[q][e] = o[q][e] * cf + p * vr[d];
      }
      m[q] = mn;
    }
  }
#pragma unroll
  for (int q = 0; q < kGroup; ++q) {
    if (q >= group) break;
#pragma unroll
    for (int e = 0; e < kPerLane; ++e) {
      const int d = lane + 32 * e;
      if (d < hd) sm_o[warp][q][d] = o[q][e];
    }
    if (lane == 0) {
      sm_m[warp][q] = m[q];
      sm_l[warp][q] = l[q];
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < group * hd; i += blockDim.x) {
    const int q = i / hd, d = i % hd;
    float mx = -INFINITY;
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, sm_m[w][q]);
    float L = 0.0f, O = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      const float e = sm_m[w][q] == -INFINITY ? 0.0f : expf(sm_m[w][q] - mx);
      L += sm_l[w][q] * e;
      O += sm_o[w][q][d] * e;
    }
    a.out[(static_cast<int64_t>(t) * a.n_head + g * group + q) * hd + d] = L > 0.0f ? O / L : 0.0f;
  }
}

// Block per KV head: the chunk's rows in order, so a later position that wraps onto an earlier
// one's slot wins, as the CPU's inserts.
__global__ void bounded_insert_kernel(const float* qkv, int64_t ld, int n, int n_head,
                                      int n_head_kv, int head_dim, int window, const int64_t* seen,
                                      float* ring_k, float* ring_v) {
  pdl_wait();
  const int g = blockIdx.x;
  const int64_t s0 = *seen;
  for (int t = 0; t < n; ++t) {
    const float* row = qkv + t * ld;
    const int64_t slot = (s0 + t) % window;
    const float* k = row + static_cast<int64_t>(n_head + g) * head_dim;
    const float* v = row + static_cast<int64_t>(n_head + n_head_kv + g) * head_dim;
    float* dk = ring_k + (static_cast<int64_t>(g) * window + slot) * head_dim;
    float* dv = ring_v + (static_cast<int64_t>(g) * window + slot) * head_dim;
    for (int i = threadIdx.x; i < head_dim; i += blockDim.x) {
      dk[i] = k[i];
      dv[i] = v[i];
    }
    __syncthreads();
  }
}

}  // namespace

void qk_head_norm(float* qkv, int64_t ld, int n, int n_head, int n_head_kv, int head_dim,
                  const float* qn, const float* kn, float eps, cudaStream_t s) {
  if (!qn && !kn) return;
  launch_k(qk_head_norm_kernel,
           dim3(static_cast<unsigned>(n_head + n_head_kv), static_cast<unsigned>(n)), 128, 0, s,
           qkv, ld, n_head, head_dim, qn, kn, eps);
  check_launch("qk_head_norm");
}

bool bounded_shape_supported(int head_dim, int group) {
  return head_dim >= 1 && head_dim <= kMaxDim && group >= 1 && group <= kGroup;
}

void bounded_attention(const BoundedArgs& a, cudaStream_t s) {
  launch_k(bounded_attention_kernel,
           dim3(static_cast<unsigned>(a.n_head_kv), static_cast<unsigned>(a.n)), kWarps * 32, 0, s,
           a);
  check_launch("bounded_attention");
}

void bounded_insert(const float* qkv, int64_t ld, int n, int n_head, int n_head_kv, int head_dim,
                    int window, const int64_t* seen, float* ring_k, float* ring_v, cudaStream_t s) {
  launch_k(bounded_insert_kernel, static_cast<unsigned>(n_head_kv), 128, 0, s, qkv, ld, n, n_head,
           n_head_kv, head_dim, window, seen, ring_k, ring_v);
  check_launch("bounded_insert");
}

}  // namespace channel::cuda
