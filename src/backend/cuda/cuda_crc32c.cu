// CRC-32C of equal planes on the device, so that a recall copied straight from the store's
// pages is verified where it landed instead of read a second time by the host's cores. CPU
// reference: util/hash.h crc32c (crc32c_ref), crc32c_combine, crc32c_join.
#include <algorithm>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_kernels.h"
#include "util/error.h"

namespace channel {
uint32_t crc32c_shift(uint64_t len_b);  // util/hash.h (C++20; this file builds as C++17)
}

namespace channel::cuda {

namespace {

constexpr int kCrcThreads = 1024;
constexpr uint64_t kCrcChunk = 64;          // bytes a thread checks, at most
constexpr uint32_t kCrcPoly = 0x82F63B78u;  // reflected, as util/hash.cpp
constexpr int kMaxLevels = 11;              // log2(kCrcThreads) + 1

struct CrcLevels {
  uint32_t shift[kMaxLevels];  // [k] x^(8 chunk 2^k) mod P: a chunk pair's right part, level k
};

__device__ __forceinline__ uint32_t crc_mul(uint32_t a, uint32_t b) {  // a * b mod P
  uint32_t r = 0;
  for (int i = 0; i < 32; ++i) {
    r = (r >> 1) ^ ((r & 1u) ? kCrcPoly : 0u);
    if ((a >> i) & 1u) r ^= b;
  }
  return r;
}

// The slicing-by-4 tables, a copy for each lane of a warp: entry (t, i) of lane l at word
// ((256 t + i) * 32 + l), so a warp's 32 lookups fall on 32 banks whatever bytes they index.
// (One shared copy: 32 random indices land on a few banks each, and the replays of those
// lookups bounded the kernel: 30 us for a 12.6 MB episode, 21 cycles an instruction.)
constexpr size_t kCrcTableBytes = 4 * 256 * 32 * sizeof(uint32_t);  // 128 KiB

__device__ __forceinline__ uint32_t crc_byte_step(uint32_t c) {  // table[0][c & 0xff] ^ (c >> 8)
  uint32_t x = c & 0xffu;
#pragma unroll
  for (int b = 0; b < 8; ++b) x = (x >> 1) ^ ((x & 1u) ? kCrcPoly : 0u);
  return x ^ (c >> 8);
}

// Block per plane: its `chunks` threads (a power of two) each take crc32c(0, .) of
// chunk_bytes consecutive bytes (4-byte words through the lane's tables; loaded 16 bytes at a
// time when `wide`: chunks of 16-byte multiples, aligned), then the chunks are combined
// pairwise in a tree (the left one shifted past the right one's length, plus it): within a
// warp by shuffles, then across warps through shared memory.
__global__ void __launch_bounds__(kCrcThreads)
    crc32c_planes_kernel(const uint8_t* data, uint64_t plane_bytes, int chunks,
                         uint64_t chunk_bytes, bool wide, CrcLevels levels, uint32_t* out) {
  extern __shared__ uint32_t tables[];  // kCrcTableBytes
  __shared__ uint32_t warp_part[kCrcThreads / 32];
  const int t = threadIdx.x, lane = t % 32;
  // The tables do not depend on the data: built before waiting on the grid before (PDL).
  for (int e = t; e < 4 * 256; e += blockDim.x) {
    const int which = e / 256;
    uint32_t c = crc_byte_step(static_cast<uint32_t>(e % 256));  // table[0][i]
    for (int k = 0; k < which; ++k) c = crc_byte_step(c);        // table[k + 1][i]
    for (int l = 0; l < 32; ++l) {  // rotated by lane, so a warp's stores hit 32 banks
      const int ll = (l + t) % 32;
      tables[e * 32 + ll] = c;
    }
  }
  pdl_wait();
  __syncthreads();
  const uint32_t* tab = tables + lane;
  uint32_t part = 0;
  if (t < chunks) {
    const uint8_t* p = data + blockIdx.x * plane_bytes + static_cast<uint64_t>(t) * chunk_bytes;
    uint32_t c = 0xffffffffu;
    auto word = [&](uint32_t w) {
      c ^= w;
      c = tab[(3 * 256 + (c & 0xffu)) * 32] ^ tab[(2 * 256 + ((c >> 8) & 0xffu)) * 32] ^
          tab[(256 + ((c >> 16) & 0xffu)) * 32] ^ tab[(c >> 24) * 32];
    };
    if (wide) {  // a quarter of the load instructions: the warp's 32 chunks are 32 lines apart
      // Eight loads out before the first word is folded in (a 12B plane's 128-byte chunks:
      // one wait for memory instead of eight).
      const auto* v = reinterpret_cast<const uint4*>(p);
      const uint64_t n = chunk_bytes / 16;
      for (uint64_t i = 0; i < n; i += 8) {
        uint4 q[8];
#pragma unroll
        for (int k = 0; k < 8; ++k)
          if (i + k < n) q[k] = v[i + k];
#pragma unroll
        for (int k = 0; k < 8; ++k)
          if (i + k < n) {
            word(q[k].x);
            word(q[k].y);
            word(q[k].z);
            word(q[k].w);
          }
      }
    } else {
      const auto* w = reinterpret_cast<const uint32_t*>(p);
      for (uint64_t i = 0; i < chunk_bytes / 4; ++i) word(w[i]);
    }
    part = ~c;
  }
  // Level k joins chunk pairs 2^k apart: in a warp while 2^k < 32, then across warps.
  int level = 0;
  for (int s = 1; s < 32 && s < chunks; s *= 2, ++level) {
    const uint32_t right = __shfl_down_sync(0xffffffffu, part, s);
    if (t % (2 * s) == 0 && t + s < chunks) part = crc_mul(part, levels.shift[level]) ^ right;
  }
  if (chunks <= 32) {
    if (t == 0) out[blockIdx.x] = part;
    return;
  }
  if (lane == 0) warp_part[t / 32] = part;
  __syncthreads();
  if (t >= 32) return;
  const int warps = chunks / 32;
  part = t < warps ? warp_part[t] : 0u;
  for (int s = 1; s < warps; s *= 2, ++level) {
    const uint32_t right = __shfl_down_sync(0xffffffffu, part, s);
    if (t % (2 * s) == 0 && t + s < warps) part = crc_mul(part, levels.shift[level]) ^ right;
  }
  if (t == 0) out[blockIdx.x] = part;
}

}  // namespace

void crc32c_planes(const void* data, int n_planes, uint64_t plane_bytes, uint32_t* out,
                   cudaStream_t s) {
  if (n_planes <= 0) return;
  if (plane_bytes % 4 != 0 || reinterpret_cast<uintptr_t>(data) % 4 != 0)
    throw_error("crc32c_planes: planes of {} bytes at {}: needs 4-byte words", plane_bytes, data);
  // The most chunks (a power of two, up to a thread each) that split a plane into equal runs
  // of words, no more than one per kCrcChunk bytes.
  int chunks = 1;
  while (2 * chunks <= kCrcThreads && 2 * chunks * kCrcChunk <= plane_bytes &&
         plane_bytes % (8ull * chunks) == 0)
    chunks *= 2;
  const uint64_t chunk_bytes = plane_bytes / chunks;
  const bool wide = chunk_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(data) % 16 == 0;
  CrcLevels levels{};
  for (int k = 0; (1 << k) < chunks && k < kMaxLevels; ++k)
    levels.shift[k] = crc32c_shift(chunk_bytes << k);
  // The tables take more shared memory than the default 48 KiB (set on the current device).
  check(cudaFuncSetAttribute(crc32c_planes_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(kCrcTableBytes)),
        "crc32c_planes tables");
  launch_k(crc32c_planes_kernel, dim3(static_cast<unsigned>(n_planes)), kCrcThreads, kCrcTableBytes,
           s, static_cast<const uint8_t*>(data), plane_bytes, chunks, chunk_bytes, wide, levels,
           out);
  check_launch("crc32c_planes");
}

bool crc32c_planes_fit() {
  int dev = 0, optin = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev),
        "shared memory per block");
  return static_cast<size_t>(optin) >= kCrcTableBytes + sizeof(uint32_t) * (kCrcThreads / 32);
}

}  // namespace channel::cuda
