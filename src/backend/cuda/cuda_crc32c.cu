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

// Block per plane: its `chunks` threads (a power of two) each take crc32c(0, .) of
// chunk_bytes consecutive bytes (4-byte words, slicing by four through shared tables; loaded
// 16 bytes at a time when `wide`: chunks of 16-byte multiples, aligned), then
// the chunks are combined pairwise in a tree (the left one shifted past the right one's
// length, plus it) into the plane's checksum. (256 threads a plane, each walking 512 bytes of
// a 12B episode's 131 KB planes, took ~22 us more than the launch for 12.6 MB; parts of a
// plane joined on the host cost a slow host ~100 us more.)
__global__ void __launch_bounds__(kCrcThreads)
    crc32c_planes_kernel(const uint8_t* data, uint64_t plane_bytes, int chunks,
                         uint64_t chunk_bytes, bool wide, CrcLevels levels, uint32_t* out) {
  pdl_wait();
  __shared__ uint32_t table[4][256];
  __shared__ uint32_t part[kCrcThreads];
  for (int i = threadIdx.x; i < 256; i += blockDim.x) {
    uint32_t c = static_cast<uint32_t>(i);
    for (int b = 0; b < 8; ++b) c = (c >> 1) ^ ((c & 1u) ? kCrcPoly : 0u);
    table[0][i] = c;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < 256; i += blockDim.x) {
    uint32_t c = table[0][i];
    for (int t = 1; t < 4; ++t) {
      c = (c >> 8) ^ table[0][c & 0xffu];
      table[t][i] = c;
    }
  }
  __syncthreads();
  const int t = threadIdx.x;
  if (t < chunks) {
    const uint8_t* p = data + blockIdx.x * plane_bytes + static_cast<uint64_t>(t) * chunk_bytes;
    uint32_t c = 0xffffffffu;
    auto word = [&](uint32_t w) {
      c ^= w;
      c = table[3][c & 0xffu] ^ table[2][(c >> 8) & 0xffu] ^ table[1][(c >> 16) & 0xffu] ^
          table[0][c >> 24];
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
    part[t] = ~c;
  }
  __syncthreads();
  int level = 0;
  for (int s = 1; s < chunks; s *= 2, ++level) {
    if (t % (2 * s) == 0 && t + s < chunks)
      part[t] = crc_mul(part[t], levels.shift[level]) ^ part[t + s];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = part[0];
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
  launch_k(crc32c_planes_kernel, dim3(static_cast<unsigned>(n_planes)), kCrcThreads, 0, s,
           static_cast<const uint8_t*>(data), plane_bytes, chunks, chunk_bytes, wide, levels, out);
  check_launch("crc32c_planes");
}

}  // namespace channel::cuda
