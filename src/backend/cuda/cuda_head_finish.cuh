// The per-head arithmetic of a layer's attention input (the q/k RMSNorm, the rotation, the
// cache's rounding), shared by qkv_finish (cuda_ops.cu) and the one-token attention that
// finishes its own heads (cuda_decode_attention.cu). Both must give the same bits: a
// speculative verify's tokens take qkv_finish, a plain decode step the fused kernel, and each
// verified token's logits are those of decoding it alone (cuda_kernels.h, kVerifyTokens).
#pragma once

#include <cstdint>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_kernels.h"

namespace channel::cuda {

template <typename T>
__device__ __forceinline__ T to_cache(float v);
template <>
__device__ __forceinline__ __half to_cache<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ float to_cache<float>(float v) {
  return v;
}

// 1 / rms(x) of a head of hd elements, computed by one warp (every lane gets it): lane k sums
// elements k, k + 32, ..., then the warp's tree.
__device__ __forceinline__ float head_rms_scale(const float* x, int hd, float eps) {
  const int lane = threadIdx.x % 32;
  float ss = 0.0f;
  for (int i = lane; i < hd; i += 32) ss += x[i] * x[i];
  ss = warp_sum(ss);
  return 1.0f / sqrtf(ss / static_cast<float>(hd) + eps);
}

// cos, sin of pair i at pos: theta_0 = pos, theta_{i+1} = theta_i * theta_scale in float.
__device__ __forceinline__ float2 rope_cs(const RopeDev& p, int32_t pos, int i) {
  float theta = static_cast<float>(pos);
  for (int k = 0; k < i; ++k) theta = __fmul_rn(theta, p.theta_scale);
  const float ff = p.freq_factors ? p.freq_factors[i] : 1.0f;
  const float angle = __fmul_rn(p.freq_scale, __fdiv_rn(theta, ff));
  return make_float2(cosf(angle), sinf(angle));
}

// Rotates pair i (of n_rot / 2) of the head v in place by cs = rope_cs(p, pos, i).
__device__ __forceinline__ void rope_pair_cs(const RopeDev& p, float2 cs, int i, float* v) {
  const int half = p.n_rot / 2;
  const int a = p.mode == RopeMode::normal ? 2 * i : i;
  const int b = p.mode == RopeMode::normal ? 2 * i + 1 : i + half;
  const float x0 = v[a], x1 = v[b];
  v[a] = __fsub_rn(__fmul_rn(x0, cs.x), __fmul_rn(x1, cs.y));
  v[b] = __fadd_rn(__fmul_rn(x0, cs.y), __fmul_rn(x1, cs.x));
}

// (cos, sin) of pair i of token t at pos: from the step's table when it has one.
__device__ __forceinline__ float2 rope_cs_at(const RopeDev& p, int t, int32_t pos, int i) {
  return p.table ? p.table[t * (p.n_rot / 2) + i] : rope_cs(p, pos, i);
}

}  // namespace channel::cuda
