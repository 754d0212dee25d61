// The GLU of decode's feed-forward and the stores of an activation in the form the next
// product reads (ActForm, cuda_kernels.h), shared by glu_quant and norm_quant (cuda_ops.cu)
// and the gate|up product that applies the GLU itself (cuda_matmul.cu): one definition, so
// the fused and unfused paths give the same bits.
#pragma once

#include <cmath>
#include <cstdint>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_online_softmax.cuh"

namespace channel::cuda {

// GELU-tanh through f16 as the CPU's table computes it (ops/activation.h).
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

// glu(gate, up): GELU-tanh (gelu) or SiLU of the gate, times up.
__device__ __forceinline__ float glu_of(float g, float u, bool gelu) {
  return gelu ? gelu_f16_table(g) * u : g / (1.0f + expf(-g)) * u;
}

// Value v of element i in an activation form (convert_act's rounding); Q8_0 blocks need the
// whole warp, 32 consecutive elements, and d after the quants.
template <int F>
__device__ __forceinline__ void act_store(float v, int64_t i, void* out, float* d) {
  if constexpr (F == static_cast<int>(ActForm::q8))
    quant_store(v, i, static_cast<int8_t*>(out), d);
  else if constexpr (F == static_cast<int>(ActForm::f16))
    static_cast<__half*>(out)[i] = __float2half_rn(v);
  else if constexpr (F == static_cast<int>(ActForm::bf16))
    static_cast<__nv_bfloat16*>(out)[i] = __float2bfloat16_rn(v);
  else
    static_cast<float*>(out)[i] = v;
}

}  // namespace channel::cuda
