// The online softmax of the slot attention kernels (attention_kernel in cuda_ops.cu,
// ring_attention_kernel in cuda_ring_ops.cu): one slot scored into each warp's running
// (max, sum, output) per query head, and the block's warps merged through shared memory into
// the output row or the split's partial (O, max, L) that attention_merge combines.
#pragma once

#include <cmath>
#include <cstdint>

#include "backend/cuda/cuda_common.cuh"

namespace channel::cuda {

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

// The W warps' (o, m, l) merged through shared memory for query t, KV head hk: with one split
// the normalised output into a.out [n][n_head][D * 32], otherwise the split's (O, max, L) into
// a.part [n][n_head][splits][D * 32 + 2]. Every thread of the block calls it (it syncs).
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
    const int h = hk * group + g;
    if (a.splits == 1) {
      a.out[(static_cast<int64_t>(t) * a.n_head + h) * HD + d] = L > 0.0f ? O / L : 0.0f;
    } else {
      float* part =
          a.part + ((static_cast<int64_t>(t) * a.n_head + h) * a.splits + split) * (HD + 2);
      part[d] = O;
      if (d == 0) {
        part[HD] = mx;
        part[HD + 1] = L;
      }
    }
  }
}

}  // namespace channel::cuda
