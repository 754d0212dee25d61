// Small device helpers shared by the kernel files.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <utility>

#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_timeline.h"

namespace channel::cuda {

#if defined(CHANNEL_CUDA_TIMELINE)
// The timeline build (cuda_timeline.h): where the marks go. Without relocatable device code
// each .cu file has its own copy of the pointer; each registers a setter, and timeline_start
// points them all at the one buffer.
struct TimelineDevice {
  unsigned int count, capacity;
  TimelineMark* marks;
};
using TimelinePoint = void (*)(TimelineDevice*);
void timeline_register(TimelinePoint point);
bool timeline_noting();
void timeline_note_launch(const void* kernel, dim3 grid, dim3 block);
static __constant__ TimelineDevice* timeline_here;
static void timeline_point_here(TimelineDevice* d) {
  check(cudaMemcpyToSymbol(timeline_here, &d, sizeof d), "pointing the timeline");
}
[[maybe_unused]] static const bool timeline_registered =
    (timeline_register(&timeline_point_here), true);

__device__ __forceinline__ uint64_t globaltimer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
#endif

// Programmatic dependent launch (sm_90): every kernel waits here for the grid before it in the
// stream (a no-op when it was launched without the attribute), so a launch with it may start
// while that grid drains. Work that reads nothing the earlier grid writes may come first.
// Before waiting, each block lets the next grid launch (griddepcontrol.launch_dependents): its
// blocks can then take free multiprocessors and start what needs no earlier output (a
// product's first weight chunk) while this grid still runs. Safe because every
// kernel here waits before it reads or writes anything another kernel touches (the weights
// are written at upload, which synchronizes before any forward), and a grid completes only
// after its own wait, so the order of completions stays the stream's.
// In the timeline build the first block of each grid also stamps when it began and when the
// wait let it go.
__device__ __forceinline__ void pdl_wait() {
#if defined(CHANNEL_CUDA_TIMELINE)
  TimelineDevice* tl = timeline_here;
  const bool mark = tl && blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0 &&
                    threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0;
  const uint64_t started = mark ? globaltimer_ns() : 0;
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
#if defined(CHANNEL_CUDA_TIMELINE)
  if (mark) {
    const unsigned int i = atomicAdd(&tl->count, 1u);
    if (i < tl->capacity)
      tl->marks[i] = TimelineMark{started, globaltimer_ns(), gridDim.x * gridDim.y * gridDim.z,
                                  blockDim.x * blockDim.y * blockDim.z};
  }
#endif
}

bool pdl_enabled();  // cuda_kernels.h

// kernel<<<grid, block, smem, s>>>(args...), with programmatic stream serialization when
// pdl_enabled(); a failed launch throws (check).
template <typename... Params, typename... Args>
void launch_k(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t s,
              Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl_enabled() ? 1 : 0;
#if defined(CHANNEL_CUDA_TIMELINE)
  if (timeline_noting()) timeline_note_launch(reinterpret_cast<const void*>(kernel), grid, block);
#endif
  check(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...), "launching a kernel");
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Element i of a row, all 32 lanes of the warp on one 32-element block: the Q8_0 activation
// arithmetic of convert_act (ops/quant.h); q holds the quants, d the blocks' scales. A block
// holding a NaN or an Inf gets a NaN scale: the max above passes over a NaN and rintf makes
// it a 0 quant, so the block would otherwise turn finite and a damaged weight would reach
// the logits as plausible numbers, past the step's non-finite check. Finite blocks are
// unchanged.
__device__ __forceinline__ void quant_store(float v, int64_t i, int8_t* q, float* d) {
  const float amax = warp_max(fabsf(v));
  const bool bad = __any_sync(0xffffffffu, !isfinite(v));
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  q[i] = static_cast<int8_t>(rintf(v * id));
  if (threadIdx.x % 32 == 0)
    d[i / 32] = bad ? __int_as_float(0x7fc00000) : __half2float(__float2half_rn(amax / 127.0f));
}

// Value v of element i in an activation form (convert_act's rounding); Q8_0 blocks need the
// whole warp, 32 consecutive elements, and d after the quants.
template <int F>  // an ActForm (cuda_kernels.h)
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

// Sum over a block of blockDim.x threads (a multiple of 32, at most 1024); every thread
// gets the result. `shared` holds 32 floats.
__device__ __forceinline__ float block_sum(float v, float* shared) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_sum(v);
  __syncthreads();  // shared may still be read from a previous call
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const int n_warps = blockDim.x / 32;
  v = lane < n_warps ? shared[lane] : 0.0f;
  return warp_sum(v);
}

}  // namespace channel::cuda
