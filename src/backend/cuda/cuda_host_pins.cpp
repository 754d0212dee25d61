#include "backend/cuda/cuda_host_pins.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include <cuda_runtime_api.h>

#include "util/error.h"

namespace channel::cuda {

namespace {

constexpr uintptr_t kChunk = HostPins::kChunkBytes;
constexpr uintptr_t kPage = 4096;

size_t budget_from_env() {
  const char* v = std::getenv("CHANNEL_CUDA_PIN_MIB");
  if (!v || !*v) return size_t{1} << 30;
  char* end = nullptr;
  const unsigned long long mib = std::strtoull(v, &end, 10);
  if (*end != '\0' || mib > (1ull << 30))
    throw_error("CHANNEL_CUDA_PIN_MIB={}: expected a number of MiB", v);
  return static_cast<size_t>(mib) << 20;
}

}  // namespace

HostPins::HostPins() : budget_(budget_from_env()) {}

HostPins::~HostPins() {
  for (const auto& [at, c] : chunks_) cudaHostUnregister(reinterpret_cast<void*>(c.begin));
}

void HostPins::unlock(std::map<uintptr_t, Chunk>::iterator it) {
  cudaHostUnregister(reinterpret_cast<void*>(it->second.begin));
  locked_ -= it->second.bytes;
  chunks_.erase(it);
}

bool HostPins::cover(const void* p, size_t bytes, const void* region, size_t region_bytes) {
  if (refused_ || bytes == 0) return !refused_;
  const auto lo = reinterpret_cast<uintptr_t>(region);
  // A mapping holds whole pages: its last one may be locked whole.
  const uintptr_t hi = (lo + region_bytes + kPage - 1) & ~(kPage - 1);
  const auto a = reinterpret_cast<uintptr_t>(p);
  if (a < lo || a + bytes > lo + region_bytes) return false;
  const uintptr_t first = a & ~(kChunk - 1), last = (a + bytes - 1) & ~(kChunk - 1);
  const size_t need = ((last - first) / kChunk + 1) * kChunk;
  if (need > budget_) return false;
  const uint64_t now = ++tick_;
  for (uintptr_t at = first; at <= last; at += kChunk) {
    auto it = chunks_.find(at);
    if (it != chunks_.end()) {
      if (it->second.region != region) return false;  // another mapping's end shares it
      it->second.used = now;
      continue;
    }
    const uintptr_t b = std::max(at, lo), e = std::min(at + kChunk, hi);
    while (locked_ + (e - b) > budget_) {  // the least recently used other chunk goes
      auto lru = chunks_.end();
      for (auto c = chunks_.begin(); c != chunks_.end(); ++c)
        if (c->second.used != now && (lru == chunks_.end() || c->second.used < lru->second.used))
          lru = c;
      if (lru == chunks_.end()) return false;
      unlock(lru);
    }
    const cudaError_t err =
        cudaHostRegister(reinterpret_cast<void*>(b), e - b, cudaHostRegisterReadOnly);
    if (err != cudaSuccess) {
      cudaGetLastError();  // not sticky: clear it
      refused_ = true;
      return false;
    }
    chunks_[at] = Chunk{b, e - b, region, now};
    locked_ += e - b;
  }
  return true;
}

void HostPins::forget(const void* region) {
  for (auto it = chunks_.begin(); it != chunks_.end();) {
    auto next = std::next(it);
    if (it->second.region == region) unlock(it);
    it = next;
  }
}

}  // namespace channel::cuda
