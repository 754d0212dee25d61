// l2_prefetch (cuda_kernels.h): sends byte ranges of weights towards L2 once the grid before
// it has finished, so HBM keeps reading while decode's small kernels run.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_kernels.h"

namespace channel::cuda {

namespace {

// Each thread prefetches one piece; pieces are small enough that the requests spread over
// many multiprocessors' copy engines.
constexpr int64_t kPieceBytes = 16 * 1024;
constexpr int kPrefetchThreads = 32;

__global__ void __launch_bounds__(kPrefetchThreads) l2_prefetch_kernel(L2Ranges r) {
  pdl_wait();  // after the product before it: HBM is idle from here
  int64_t piece = static_cast<int64_t>(blockIdx.x) * kPrefetchThreads + threadIdx.x;
  for (int i = 0; i < r.count; ++i) {
    const int64_t pieces = (r.bytes[i] + kPieceBytes - 1) / kPieceBytes;
    if (piece >= pieces) {
      piece -= pieces;
      continue;
    }
    const int64_t at = piece * kPieceBytes;
    const char* p = static_cast<const char*>(r.ptr[i]) + at;
    const int64_t left = r.bytes[i] - at;
    const int64_t len = left < kPieceBytes ? left : kPieceBytes;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    // One asynchronous bulk request: the thread does not wait for it.
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p),
                 "r"(static_cast<uint32_t>(len))
                 : "memory");
#else
    for (int64_t o = 0; o < len; o += 128) asm volatile("prefetch.global.L2 [%0];" ::"l"(p + o));
#endif
    return;
  }
}

}  // namespace

void l2_prefetch(const L2Ranges& ranges, cudaStream_t s) {
  L2Ranges r{};
  int64_t pieces = 0;
  for (int i = 0; i < ranges.count; ++i) {
    // 16-byte aligned start and length, as the bulk request needs.
    const auto a = reinterpret_cast<uintptr_t>(ranges.ptr[i]);
    const uintptr_t start = (a + 15) & ~uintptr_t{15};
    const int64_t len = (ranges.bytes[i] - static_cast<int64_t>(start - a)) & ~int64_t{15};
    if (len <= 0) continue;
    r.ptr[r.count] = reinterpret_cast<const void*>(start);
    r.bytes[r.count] = len;
    ++r.count;
    pieces += (len + kPieceBytes - 1) / kPieceBytes;
  }
  if (pieces == 0) return;
  const auto blocks = static_cast<unsigned>((pieces + kPrefetchThreads - 1) / kPrefetchThreads);
  launch_k(l2_prefetch_kernel, dim3(blocks), dim3(kPrefetchThreads), 0, s, r);
}

}  // namespace channel::cuda
