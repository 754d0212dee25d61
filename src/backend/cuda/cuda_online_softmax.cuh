// The online softmax of the slot attention kernels (attention_kernel in cuda_ops.cu,
// ring_attention_kernel in cuda_ring_ops.cu), and load_kv, the cached-row loader they share
// with decode_attention (cuda_decode_attention.cu): one slot scored into each warp's running
// (max, sum, output) per query head, and the block's warps merged through shared memory into
// the output row or the split's partial (O, max, L) that attention_merge combines.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "backend/cuda/cuda_common.cuh"

namespace channel::cuda {

// This lane's D elements of a cached key or value row (f32, or f16 widened to f32).
template <int D>
__device__ __forceinline__ void load_kv(const float* p, float* out) {
  if constexpr (D % 4 == 0) {
#pragma unroll
    for (int i = 0; i < D / 4; ++i) {
      const float4 v = reinterpret_cast<const float4*>(p)[i];
      out[4 * i] = v.x;
      out[4 * i + 1] = v.y;
      out[4 * i + 2] = v.z;
      out[4 * i + 3] = v.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < D; ++i) out[i] = p[i];
  }
}

template <int D>
__device__ __forceinline__ void load_kv(const __half* p, float* out) {
  // The widest load the lane's offset allows: lane * D halves from a row of D * 32.
  if constexpr (D % 8 == 0) {
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      const int4 v = reinterpret_cast<const int4*>(p)[j];
      const __half2* h = reinterpret_cast<const __half2*>(&v);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float2 f = __half22float2(h[i]);
        out[8 * j + 2 * i] = f.x;
        out[8 * j + 2 * i + 1] = f.y;
      }
    }
  } else if constexpr (D % 4 == 0) {
#pragma unroll
    for (int j = 0; j < D / 4; ++j) {
      const uint2 v = reinterpret_cast<const uint2*>(p)[j];
      const __half2* h = reinterpret_cast<const __half2*>(&v);
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const float2 f = __half22float2(h[i]);
        out[4 * j + 2 * i] = f.x;
        out[4 * j + 2 * i + 1] = f.y;
      }
    }
  } else if constexpr (D % 2 == 0) {
#pragma unroll
    for (int j = 0; j < D / 2; ++j) {
      const float2 f = __half22float2(reinterpret_cast<const __half2*>(p)[j]);
      out[2 * j] = f.x;
      out[2 * j + 1] = f.y;
    }
  } else {
#pragma unroll
    for (int i = 0; i < D; ++i) out[i] = __half2float(p[i]);
  }
}

// fn(integral_constant<int, D>) for a head of head_dim = 32 * D elements, D = 1 .. 8 (a lane
// holds D of them): the head sizes the slot kernels take (attention_shape_supported).
template <typename Fn>
void with_lane_elements(int head_dim, Fn&& fn) {
  using std::integral_constant;
  switch (head_dim) {
    case 32:
      fn(integral_constant<int, 1>{});
      break;
    case 64:
      fn(integral_constant<int, 2>{});
      break;
    case 96:
      fn(integral_constant<int, 3>{});
      break;
    case 128:
      fn(integral_constant<int, 4>{});
      break;
    case 160:
      fn(integral_constant<int, 5>{});
      break;
    case 192:
      fn(integral_constant<int, 6>{});
      break;
    case 224:
      fn(integral_constant<int, 7>{});
      break;
    default:
      fn(integral_constant<int, 8>{});
      break;
  }
}

// One slot (this lane's D elements of its key kv and value vv) into the running m (max), l
// (sum of exp) and o (output) of query heads 0 .. group - 1 (q: this lane's D elements each).
template <int D, int G>
__device__ __forceinline__ void online_softmax_add(const float (&q)[G][D], const float (&kv)[D],
                                                   const float (&vv)[D], int group, float scale,
                                                   float (&o)[G][D], float (&m)[G],
                                                   float (&l)[G]) {
#pragma unroll
  for (int g = 0; g < G; ++g) {
    if (g >= group) break;
    float s = 0.0f;
#pragma unroll
    for (int d = 0; d < D; ++d) s = fmaf(q[g][d], kv[d], s);
    s = warp_sum(s) * scale;
    const float mn = fmaxf(m[g], s);
    const float c = expf(m[g] - mn), p = expf(s - mn);
    l[g] = l[g] * c + p;
#pragma unroll
    for (int d = 0; d < D; ++d) o[g][d] = fmaf(o[g][d], c, p * vv[d]);
    m[g] = mn;
  }
}

// This warp's slots j = first, first + W, ... below end (W: the block's warps), slot_of(j)
// their cache rows, each scored in turn into (o, m, l) while the next kAhead slots' keys and
// values load (vector loads, load_kv).
template <int D, int G, int W, int kAhead, typename T, typename SlotOf>
__device__ __forceinline__ void score_slots_ahead(SlotOf slot_of, int first, int end, const T* kb,
                                                  const T* vb, int lane, const float (&q)[G][D],
                                                  int group, float scale, float (&o)[G][D],
                                                  float (&m)[G], float (&l)[G]) {
  constexpr int HD = D * 32, kStride = kAhead * W;
  float kn[kAhead][D], vn[kAhead][D];
#pragma unroll
  for (int i = 0; i < kAhead; ++i) {
    const int j = first + i * W;
    if (j < end) {
      const int64_t slot = slot_of(j);
      load_kv<D>(kb + slot * HD + lane * D, kn[i]);
      load_kv<D>(vb + slot * HD + lane * D, vn[i]);
    }
  }
  for (int j = first; j < end; j += kStride) {
#pragma unroll
    for (int i = 0; i < kAhead; ++i) {
      const int ji = j + i * W;
      if (ji >= end) break;
      float kv[D], vv[D];
#pragma unroll
      for (int d = 0; d < D; ++d) {
        kv[d] = kn[i][d];
        vv[d] = vn[i][d];
      }
      if (ji + kStride < end) {
        const int64_t next = slot_of(ji + kStride);
        load_kv<D>(kb + next * HD + lane * D, kn[i]);
        load_kv<D>(vb + next * HD + lane * D, vn[i]);
      }
      online_softmax_add(q, kv, vv, group, scale, o, m, l);
    }
  }
}

// Element i of the attention output [n][n_head][head_dim_v] (`row` elements a token): to
// a.out, or in a.out_form to a.out_act (Q8_0: a warp's 32 consecutive elements make one block,
// its scales after the n rows of quants). The form is the same for every thread.
template <typename Args>
__device__ __forceinline__ void store_output(const Args& a, int64_t i, int64_t row, float v) {
  if (!a.out_act) {
    a.out[i] = v;
    return;
  }
  float* d =
      reinterpret_cast<float*>(static_cast<int8_t*>(a.out_act) + static_cast<int64_t>(a.n) * row);
  switch (a.out_form) {
    case ActForm::q8:
      act_store<static_cast<int>(ActForm::q8)>(v, i, a.out_act, d);
      break;
    case ActForm::f16:
      act_store<static_cast<int>(ActForm::f16)>(v, i, a.out_act, d);
      break;
    case ActForm::bf16:
      act_store<static_cast<int>(ActForm::bf16)>(v, i, a.out_act, d);
      break;
    case ActForm::f32:
      act_store<static_cast<int>(ActForm::f32)>(v, i, a.out_act, d);
      break;
  }
}

// Element d of query t, head h, from its split's unnormalised output O, max mx and sum L: with
// one split the normalised value into a.out (or its Q8_0 blocks), otherwise the split's
// (O, max, L) into a.part [n][n_head][splits][HD + 2].
template <int HD, typename Args>
__device__ __forceinline__ void store_result(const Args& a, int t, int h, int split, int d, float O,
                                             float mx, float L) {
  if (a.splits == 1) {
    store_output(a, (static_cast<int64_t>(t) * a.n_head + h) * HD + d,
                 static_cast<int64_t>(a.n_head) * HD, L > 0.0f ? O / L : 0.0f);
  } else {
    float* part = a.part + ((static_cast<int64_t>(t) * a.n_head + h) * a.splits + split) * (HD + 2);
    part[d] = O;
    if (d == 0) {
      part[HD] = mx;
      part[HD + 1] = L;
    }
  }
}

// The W warps' (o, m, l) merged through shared memory for query t, KV head hk: with one split
// the normalised output into a.out [n][n_head][D * 32] (or W_o's input, a.out_act),
// otherwise the split's (O, max, L) into a.part [n][n_head][splits][D * 32 + 2]. Every thread
// of the block calls it (it syncs).
template <int D, int G, int W, typename Args>
__device__ __forceinline__ void online_softmax_merge(const Args& a, int hk, int split, int t,
                                                     int group, const float (&o)[G][D],
                                                     const float (&m)[G], const float (&l)[G],
                                                     float (&sm_o)[W][G][D * 32],
                                                     float (&sm_m)[W][G], float (&sm_l)[W][G]) {
  constexpr int HD = D * 32;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
  for (int g = 0; g < G; ++g) {
    if (g >= group) break;
#pragma unroll
    for (int d = 0; d < D; ++d) sm_o[warp][g][lane * D + d] = o[g][d];
    if (lane == 0) {
      sm_m[warp][g] = m[g];
      sm_l[warp][g] = l[g];
    }
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < group * HD; idx += blockDim.x) {
    const int g = idx / HD, d = idx % HD;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < W; ++w) mx = fmaxf(mx, sm_m[w][g]);
    float L = 0.0f, O = 0.0f;
    if (mx != -INFINITY) {
#pragma unroll
      for (int w = 0; w < W; ++w) {
        const float e = sm_m[w][g] == -INFINITY ? 0.0f : expf(sm_m[w][g] - mx);
        L += sm_l[w][g] * e;
        O += sm_o[w][g][d] * e;
      }
    }
    store_result<HD>(a, t, hk * group + g, split, d, O, mx, L);
  }
}

}  // namespace channel::cuda
