// cuda_read_bandwidth_bench: how fast this GPU's kernels can read device memory at all, the
// ceiling of a weight-streaming decode step (issue 14 states its goals as shares of "the HBM
// read bandwidth measured"). Each form sums a buffer far larger than L2 and writes one word
// a block (so nothing is optimized away); the best of the rounds counts.
//   plain  U   : grid-stride 16-byte loads, U of them in flight a thread, as many 512-thread
//                blocks as the device holds at once
//   bulk W x S x B: W warps a block each keep S stages of B KiB coming into shared memory
//                through the copy engine (cp.async.bulk on an mbarrier), as decode's v8 does
//   cuda_read_bandwidth_bench [GiB=8] [ROUNDS=5]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backend/cuda/cuda_bulk_copy.cuh"

namespace {

using namespace channel::cuda;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "cuda_read_bandwidth_bench: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

template <int U>
__global__ void __launch_bounds__(512) read_plain(const int4* p, int64_t n, uint32_t* out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  uint32_t acc = 0;
  for (; i + (U - 1) * stride < n; i += U * stride) {
    int4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = __ldcs(p + i + u * stride);  // streamed: not kept in L2
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n; i += stride) {
    const int4 v = __ldcs(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) out[blockIdx.x] = acc;  // never true for this buffer's bytes
}

// Block b reads chunks b, b + gridDim.x, ... of `chunk` bytes; warp w of it the parts
// w, w + W, ... of each; a warp's lane 0 keeps S stages requested.
template <int W, int S>
__global__ void __launch_bounds__(W * 32)
    read_bulk(const uint8_t* p, int64_t bytes, int stage_bytes, uint32_t* out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) uint8_t smem[];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  uint8_t* ring = smem + static_cast<size_t>(warp) * S * stage_bytes;
  uint64_t* bars =
      reinterpret_cast<uint64_t*>(smem + static_cast<size_t>(W) * S * stage_bytes) + warp * S;
  const int64_t pieces = bytes / stage_bytes;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * W + warp;
  const int64_t step = static_cast<int64_t>(gridDim.x) * W;
  const int64_t mine = first < pieces ? (pieces - first + step - 1) / step : 0;
  auto issue = [&](int64_t j) {
    bar_expect(&bars[j % S], static_cast<uint32_t>(stage_bytes));
    bulk_copy(ring + (j % S) * stage_bytes, p + (first + j * step) * stage_bytes,
              static_cast<uint32_t>(stage_bytes), &bars[j % S]);
  };
  if (lane == 0) {
    for (int s = 0; s < S; ++s) bar_init(&bars[s]);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    for (int64_t j = 0; j < mine && j < S; ++j) issue(j);
  }
  __syncwarp();
  uint32_t acc = 0;
  for (int64_t j = 0; j < mine; ++j) {
    bar_wait(&bars[j % S], static_cast<uint32_t>((j / S) & 1));
    const int4* st = reinterpret_cast<const int4*>(ring + (j % S) * stage_bytes);
    for (int i = lane; i < stage_bytes / 16; i += 32) {
      const int4 v = st[i];
      acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    __syncwarp();
    if (lane == 0 && j + S < mine) issue(j + S);
  }
  if (acc == 0x9e3779b9u) out[blockIdx.x] = acc;
#else
  __trap();  // the copy engine's bulk copies need sm_90
#endif
}

struct Timer {
  cudaEvent_t a, b;
  Timer() {
    check(cudaEventCreate(&a), "event");
    check(cudaEventCreate(&b), "event");
  }
  template <typename F>
  double seconds(F&& launch) {
    check(cudaEventRecord(a), "record");
    launch();
    check(cudaGetLastError(), "launch");
    check(cudaEventRecord(b), "record");
    check(cudaEventSynchronize(b), "sync");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, a, b), "elapsed");
    return ms / 1e3;
  }
};

}  // namespace

int main(int argc, char** argv) {
  const double gib = argc > 1 ? std::atof(argv[1]) : 8.0;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
  const int64_t bytes = static_cast<int64_t>(gib * (1 << 30)) / (1 << 20) * (1 << 20);
  if (bytes <= 0 || rounds <= 0) {
    std::fprintf(stderr, "usage: cuda_read_bandwidth_bench [GiB=8] [ROUNDS=5]\n");
    return 2;
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "device properties");
  uint8_t* buf = nullptr;
  uint32_t* out = nullptr;
  check(cudaMalloc(&buf, static_cast<size_t>(bytes)), "allocating the buffer");
  check(cudaMalloc(&out, 1 << 20), "allocating the output");
  check(cudaMemset(buf, 0x5a, static_cast<size_t>(bytes)), "filling the buffer");
  check(cudaDeviceSynchronize(), "fill");
  std::printf("%s, %d SMs, L2 %.0f MiB, buffer %.2f GiB, best of %d rounds\n", prop.name,
              prop.multiProcessorCount, prop.l2CacheSize / 1048576.0, bytes / 1073741824.0, rounds);
  Timer timer;
  auto report = [&](const char* form, int64_t read, auto&& launch) {
    launch();  // warm-up
    check(cudaDeviceSynchronize(), form);
    double best = 1e30;
    for (int r = 0; r < rounds; ++r) best = std::min(best, timer.seconds(launch));
    std::printf("%-24s %7.3f TB/s\n", form, read / best / 1e12);
    std::printf("{\"form\":\"%s\",\"tb_per_s\":%.4f}\n", form, read / best / 1e12);
  };
  const int sms = prop.multiProcessorCount;
  const int64_t n16 = bytes / 16;
  auto plain = [&](auto kernel, const char* name) {
    int per_sm = 0;
    check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, 512, 0), "occupancy");
    report(name, bytes,
           [&] { kernel<<<sms * per_sm, 512>>>(reinterpret_cast<const int4*>(buf), n16, out); });
  };
  plain(read_plain<1>, "plain U=1");
  plain(read_plain<4>, "plain U=4");
  plain(read_plain<8>, "plain U=8");
  auto bulk = [&](auto kernel, int warps, int stages, int kib, const char* name) {
    const int stage = kib * 1024;
    const size_t smem = static_cast<size_t>(warps) * stages * (stage + 8);
    if (smem > static_cast<size_t>(prop.sharedMemPerBlockOptin)) return;
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(smem)),
          "shared memory");
    report(name, bytes / stage * stage,
           [&] { kernel<<<sms, warps * 32, smem>>>(buf, bytes, stage, out); });
  };
  bulk(read_bulk<16, 2>, 16, 2, 4, "bulk 16x2x4KiB (v8)");
  bulk(read_bulk<16, 3>, 16, 3, 4, "bulk 16x3x4KiB");
  bulk(read_bulk<8, 4>, 8, 4, 4, "bulk 8x4x4KiB");
  bulk(read_bulk<4, 4>, 4, 4, 12, "bulk 4x4x12KiB");
  bulk(read_bulk<8, 2>, 8, 2, 12, "bulk 8x2x12KiB");
  cudaFree(buf);
  cudaFree(out);
  return 0;
}
