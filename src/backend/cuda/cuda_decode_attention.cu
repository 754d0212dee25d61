// One-token slot attention (decode, and each token of a speculative verify) in one kernel:
// each query's slots split over blocks as attention_kernel's, and the last block of a
// (token, KV head) to finish, counted by an atomic, merges the splits' parts, so no merge
// kernel follows. With `finish` the kernel also normalises and rotates the token's q and k
// heads itself and stores its k and v: a layer's attention is one launch after the q|k|v
// product instead of three (qkv_finish, attention_kernel, attention_merge_kernel). A short
// context takes as few splits as hold it at kSlotsPerSplit (the merge reads fewer parts). The
// warps load several slots' keys and values before scoring any, and the next slots' before
// scoring these (attention_kernel's warps waited for one slot's loads at a time). CPU
// reference: attend_ref (ops/attention.h); tests: cuda_decode_attention_test.cpp. Opt-in
// (CHANNEL_CUDA_DECODE_ATTN=one): on the H200 the three kernels are faster (docs/cuda.md).
#include <cmath>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_head_finish.cuh"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_online_softmax.cuh"

namespace channel::cuda {

namespace {

// Four warps a block leave room for two blocks a multiprocessor (a long context fills 33
// splits of every KV head in one wave); a split of a short context holds one load of B = 4
// slots a warp: at depth ~128 on the H200 8 warps and 64 slots a split (8 - 16 blocks for a
// 12B layer) made each block's instruction chain the step's bound.
constexpr int kWarps = 4;
constexpr int kSlotsPerSplit = 16;  // at least, in a split of a short context

// Shared memory of a block, in floats: the group's queries then the new key and value
// [G + 2][HD]; the q and k norm weights [2][HD]; the rotation's (cos, sin) [HD / 2][2]; each
// warp's (O [G][HD], max [G], sum [G]); the merge's parts' weights and sums [2][G][kMaxSplits]
// and each head's sum [G].
constexpr int kMaxSplits = 64;  // attention_splits' bound
constexpr int smem_floats(int G, int HD) {
  return (G + 2) * HD + 2 * HD + HD + kWarps * G * HD + 2 * kWarps * G + 2 * G * kMaxSplits + G;
}

// A lane's D elements of a cached key or value row as stored, loaded in one vector access
// where the size allows; widened to f32 when used.
template <int D, typename T>
struct alignas(16) KvPiece {
  T v[D];
};
template <int D, typename T>
__device__ __forceinline__ void load_piece(const T* p, KvPiece<D, T>& out) {
  constexpr size_t bytes = sizeof(T) * D;
  if constexpr (bytes % 16 == 0) {
#pragma unroll
    for (size_t i = 0; i < bytes / 16; ++i)
      reinterpret_cast<int4*>(out.v)[i] = reinterpret_cast<const int4*>(p)[i];
  } else if constexpr (bytes == 8) {
    *reinterpret_cast<uint2*>(out.v) = *reinterpret_cast<const uint2*>(p);
  } else if constexpr (bytes == 4) {
    *reinterpret_cast<uint32_t*>(out.v) = *reinterpret_cast<const uint32_t*>(p);
  } else {
#pragma unroll
    for (int d = 0; d < D; ++d) out.v[d] = p[d];
  }
}

// Grid (n_head_kv, a.splits, n): block (hk, split, t) takes the split-th of `parts` equal
// parts of token t's slots, parts = min(a.splits, ceil(count / kSlotsPerSplit)) (blocks past
// them leave at once).
// G: the query heads a KV head serves (at most; `group` of them used), B: the slots a warp
// loads before scoring them. Every load that does not wait for another is issued first (the
// slot range, the table, the first slots' keys and values, the norm weights, the rotation),
// the first of them before the wait for the kernel before (see there).
template <int D, typename T, int G, int B>
__global__ void __launch_bounds__(kWarps * 32) decode_attention_kernel(DecodeAttnArgs p) {
  constexpr int HD = D * 32;
  const AttnArgs& a = p.a;
  const int hk = static_cast<int>(blockIdx.x), split = static_cast<int>(blockIdx.y);
  const int t = static_cast<int>(blockIdx.z);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int group = a.n_head / a.n_head_kv;
  extern __shared__ float sm[];
  float* heads = sm;  // [G + 2][HD]: queries 0 .. group - 1, the key at G, the value at G + 1
  float* norms = heads + (G + 2) * HD;  // q's then k's
  float2* cs = reinterpret_cast<float2*>(norms + 2 * HD);
  float* wo = norms + 3 * HD;
  float* wm = wo + kWarps * G * HD;
  float* wl = wm + kWarps * G;
  float* weight = wl + kWarps * G;        // [G][kMaxSplits]: the parts' maxima, then weights
  float* sums = weight + G * kMaxSplits;  // [G][kMaxSplits]
  float* head_sum = sums + G * kMaxSplits;
  // Before waiting for the kernel before (pdl_wait): what no kernel of this step writes. The
  // step's inputs (slot ranges, table, positions) were copied before its first kernel; the
  // norm weights are constant; and with `finish` (one token) no kernel of the step writes
  // this layer's cache but this one, so the keys and values of the other slots can load while
  // the q|k|v product still runs. (A verify's tokens wait: qkv_finish stores them just before.)
  // This block's part of the slots; this warp's are table[first + j0 + warp + kWarps * k],
  // k < nk, lane k % 32 holding the entry of k for the current 32.
  const int first = a.first[t], count = a.count[t];
  const int64_t store = p.finish ? p.store_slots[t] : -1;  // its key and value: computed here
  const int parts = max(1, min(a.splits, (count + kSlotsPerSplit - 1) / kSlotsPerSplit));
  if (split >= parts) return;
  const int per = (count + parts - 1) / parts;
  const int j0 = min(count, split * per), j1 = min(count, j0 + per);
  const int nk = j1 - j0 > warp ? (j1 - j0 - warp + kWarps - 1) / kWarps : 0;
  int entry = lane < nk ? a.table[first + j0 + warp + kWarps * lane] : 0;
  const T* kb = static_cast<const T*>(a.k_cache) + hk * a.cap * HD;
  const T* vb = static_cast<const T*>(a.v_cache) + hk * a.cap * HD;
  KvPiece<D, T> kr[B], vr[B];
  bool ok[B], own[B];
  auto issue = [&](int k0) {  // the loads of this warp's slots k0 .. k0 + B - 1
#pragma unroll
    for (int u = 0; u < B; ++u) {
      const int64_t slot = __shfl_sync(0xffffffffu, entry, (k0 + u) % 32);
      ok[u] = k0 + u < nk;
      own[u] = ok[u] && slot == store;
      if (ok[u] && !own[u]) {
        load_piece<D, T>(kb + slot * HD + lane * D, kr[u]);
        load_piece<D, T>(vb + slot * HD + lane * D, vr[u]);
      }
    }
  };
  if (p.finish) issue(0);
  const int half = p.finish ? p.rope.n_rot / 2 : 0;
  if (p.finish) {
    for (int idx = static_cast<int>(threadIdx.x); idx < 2 * HD; idx += kWarps * 32) {
      const float* w = idx < HD ? p.qn : p.kn;
      norms[idx] = w ? w[idx % HD] : 1.0f;
    }
    const int32_t pos = p.positions[t];
    for (int i = static_cast<int>(threadIdx.x); i < half; i += kWarps * 32)
      cs[i] = rope_cs_at(p.rope, t, pos, i);
  }
  pdl_wait();
  if (!p.finish) issue(0);

  const float* row = a.q + t * a.ldq;
  const int n_in = p.finish ? group + 2 : group;
  for (int idx = static_cast<int>(threadIdx.x); idx < n_in * HD; idx += kWarps * 32) {
    const int h = idx / HD, i = idx % HD;
    if (h < group) {
      heads[h * HD + i] = row[static_cast<int64_t>(hk * group + h) * HD + i];
    } else {  // the key heads follow the query heads, the value heads the keys
      const int64_t at = h == group ? a.n_head + hk : a.n_head + a.n_head_kv + hk;
      heads[(G + h - group) * HD + i] = row[at * HD + i];
    }
  }
  __syncthreads();
  if (p.finish) {
    for (int h = warp; h <= group; h += kWarps) {  // RMSNorm: a warp a head, the key last
      if (!(h < group ? p.qn : p.kn)) continue;
      float* x = heads + (h < group ? h : G) * HD;
      const float* w = norms + (h < group ? 0 : HD);
      const float scale = head_rms_scale(x, HD, p.eps);
      for (int i = lane; i < HD; i += 32) x[i] = (x[i] * scale) * w[i];
    }
    __syncthreads();
    for (int idx = static_cast<int>(threadIdx.x); idx < (group + 1) * half; idx += kWarps * 32) {
      const int h = idx / half;
      rope_pair_cs(p.rope, cs[idx % half], idx % half, heads + (h < group ? h : G) * HD);
    }
    __syncthreads();
    T* kd = const_cast<T*>(kb) + store * HD;
    T* vd = const_cast<T*>(vb) + store * HD;
    for (int i = static_cast<int>(threadIdx.x); i < HD; i += kWarps * 32) {
      const T k = to_cache<T>(heads[G * HD + i]), v = to_cache<T>(heads[(G + 1) * HD + i]);
      heads[G * HD + i] = static_cast<float>(k);  // as the cache holds them
      heads[(G + 1) * HD + i] = static_cast<float>(v);
      if (split == 0) {
        kd[i] = k;
        vd[i] = v;
      }
    }
    __syncthreads();
  }

  float q[G][D], o[G][D], m[G], l[G];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
#pragma unroll
    for (int d = 0; d < D; ++d) {
      o[g][d] = 0.0f;
      q[g][d] = g < group ? heads[g * HD + lane * D + d] : 0.0f;
    }
  }
  for (int k0 = 0; k0 < nk; k0 += B) {
    bool live[B];
    float kv[B][D], vv[B][D];
#pragma unroll
    for (int u = 0; u < B; ++u) {
      live[u] = ok[u];
#pragma unroll
      for (int d = 0; d < D; ++d) {
        kv[u][d] = !ok[u]   ? 0.0f
                   : own[u] ? heads[G * HD + lane * D + d]
                            : static_cast<float>(kr[u].v[d]);
        vv[u][d] = !ok[u]   ? 0.0f
                   : own[u] ? heads[(G + 1) * HD + lane * D + d]
                            : static_cast<float>(vr[u].v[d]);
      }
    }
    const int next = k0 + B;  // the next slots' loads go out before these are scored
    if (next < nk) {
      if (next % 32 == 0) {
        const int k = next + lane;
        entry = k < nk ? a.table[first + j0 + warp + kWarps * k] : 0;
      }
      issue(next);
    }
    float s[B][G];
#pragma unroll
    for (int u = 0; u < B; ++u)
#pragma unroll
      for (int g = 0; g < G; ++g) {
        float dot = 0.0f;
#pragma unroll
        for (int d = 0; d < D; ++d) dot = fmaf(q[g][d], kv[u][d], dot);
        s[u][g] = live[u] && g < group ? warp_sum(dot) * a.scale : -INFINITY;
      }
#pragma unroll
    for (int g = 0; g < G; ++g) {
      if (g >= group) break;
      float mn = m[g];
#pragma unroll
      for (int u = 0; u < B; ++u) mn = fmaxf(mn, s[u][g]);
      const float c = expf(m[g] - mn);
      float pu[B], sum = 0.0f;
#pragma unroll
      for (int u = 0; u < B; ++u) {
        pu[u] = live[u] ? expf(s[u][g] - mn) : 0.0f;
        sum += pu[u];
      }
      l[g] = l[g] * c + sum;
#pragma unroll
      for (int d = 0; d < D; ++d) {
        float acc = o[g][d] * c;
#pragma unroll
        for (int u = 0; u < B; ++u) acc = fmaf(pu[u], vv[u][d], acc);
        o[g][d] = acc;
      }
      m[g] = mn;
    }
  }

  // The block's warps merged into its part (O, max, sum): the output itself when it is the
  // only part, else into a.part [t][head][split][HD + 2] (attention_kernel's layout).
#pragma unroll
  for (int g = 0; g < G; ++g) {
    if (g >= group) break;
#pragma unroll
    for (int d = 0; d < D; ++d) wo[(warp * G + g) * HD + lane * D + d] = o[g][d];
    if (lane == 0) {
      wm[warp * G + g] = m[g];
      wl[warp * G + g] = l[g];
    }
  }
  __syncthreads();
  for (int idx = static_cast<int>(threadIdx.x); idx < group * HD; idx += kWarps * 32) {
    const int g = idx / HD, d = idx % HD, h = hk * group + g;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, wm[w * G + g]);
    float L = 0.0f, O = 0.0f;
    if (mx != -INFINITY) {
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        const float e = wm[w * G + g] == -INFINITY ? 0.0f : expf(wm[w * G + g] - mx);
        L += wl[w * G + g] * e;
        O += wo[(w * G + g) * HD + d] * e;
      }
    }
    if (parts == 1) {  // a warp's 32 consecutive elements: one Q8_0 block of out_act
      store_output(a, (static_cast<int64_t>(t) * a.n_head + h) * HD + d,
                   static_cast<int64_t>(a.n_head) * HD, L > 0.0f ? O / L : 0.0f);
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
  if (parts == 1) return;

  // The last of the parts' blocks to arrive merges them (a release/acquire through the
  // counter, which it leaves at 0 for the next launch).
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned* arrived = p.arrivals + t * a.n_head_kv + hk;
    last = atomicAdd(arrived, 1u) == static_cast<unsigned>(parts - 1);
    if (last) *arrived = 0;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  const float* part0 =
      a.part + (static_cast<int64_t>(t) * a.n_head + hk * group) * a.splits * (HD + 2);
  for (int idx = static_cast<int>(threadIdx.x); idx < group * parts; idx += kWarps * 32) {
    const int g = idx / parts, sp = idx % parts;
    const float* ml = part0 + (g * a.splits + sp) * (HD + 2) + HD;
    weight[g * kMaxSplits + sp] = __ldcg(ml);
    sums[g * kMaxSplits + sp] = __ldcg(ml + 1);
  }
  __syncthreads();
  if (static_cast<int>(threadIdx.x) < group) {  // per head: the largest max, then the sum
    const int g = static_cast<int>(threadIdx.x);
    float mx = -INFINITY;
    for (int sp = 0; sp < parts; ++sp) mx = fmaxf(mx, weight[g * kMaxSplits + sp]);
    float L = 0.0f;
    for (int sp = 0; sp < parts; ++sp) {
      float& w = weight[g * kMaxSplits + sp];
      w = w == -INFINITY ? 0.0f : expf(w - mx);  // an empty part weighs 0
      L += sums[g * kMaxSplits + sp] * w;
    }
    head_sum[g] = L;
  }
  __syncthreads();
  for (int idx = static_cast<int>(threadIdx.x); idx < group * HD; idx += kWarps * 32) {
    const int g = idx / HD, d = idx % HD;
    const float* pg = part0 + g * a.splits * (HD + 2) + d;
    float O = 0.0f;
#pragma unroll 8
    for (int sp = 0; sp < parts; ++sp)
      O = fmaf(__ldcg(pg + sp * (HD + 2)), weight[g * kMaxSplits + sp], O);
    const float L = head_sum[g];
    store_output(a, (static_cast<int64_t>(t) * a.n_head + hk * group + g) * HD + d,
                 static_cast<int64_t>(a.n_head) * HD, L > 0.0f ? O / L : 0.0f);
  }
}

template <int D, typename T, int G>
void launch_decode(const DecodeAttnArgs& d, cudaStream_t s) {
  constexpr int B = G >= 8 ? 2 : 4;  // registers: B slots' keys and values beside q and O
  const auto kernel = decode_attention_kernel<D, T, G, B>;
  const size_t smem = static_cast<size_t>(smem_floats(G, D * 32)) * sizeof(float);
  if (smem > 48 * 1024)
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(smem)),
          "decode attention: shared memory");
  launch_k(kernel,
           dim3(static_cast<unsigned>(d.a.n_head_kv), static_cast<unsigned>(d.a.splits),
                static_cast<unsigned>(d.a.n)),
           kWarps * 32, smem, s, d);
}

template <int D, typename T>
void launch_group(const DecodeAttnArgs& d, cudaStream_t s) {
  const int group = d.a.n_head / d.a.n_head_kv;
  if (group <= 1)
    launch_decode<D, T, 1>(d, s);
  else if (group <= 2)
    launch_decode<D, T, 2>(d, s);
  else if (group <= 4)
    launch_decode<D, T, 4>(d, s);
  else
    launch_decode<D, T, 8>(d, s);
}

template <typename T>
void launch_head(const DecodeAttnArgs& d, cudaStream_t s) {
  with_lane_elements(d.a.head_dim, [&](auto e) { launch_group<decltype(e)::value, T>(d, s); });
}

}  // namespace

bool decode_attention_supported(const AttnArgs& a) {
  return a.n >= 1 && a.n <= kVerifyTokens && a.splits >= 1 && a.splits <= kMaxSplits &&
         a.n_head % a.n_head_kv == 0 &&
         attention_shape_supported(a.head_dim, a.head_dim_v, a.n_head / a.n_head_kv);
}

void decode_attention(const DecodeAttnArgs& d, cudaStream_t s) {
  if (d.finish && d.a.n != 1) fail(cudaErrorInvalidValue, "decode attention finishes one token");
  if (d.a.kv_f32)
    launch_head<float>(d, s);
  else
    launch_head<__half>(d, s);
  check_launch("decode_attention");
}

}  // namespace channel::cuda
