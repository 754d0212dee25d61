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

HostPins::HostPins()
    : HostPins(
          budget_from_env(),
          [](void* p, size_t bytes) {
            if (cudaHostRegister(p, bytes, cudaHostRegisterReadOnly) == cudaSuccess) return true;
            cudaGetLastError();  // not sticky: clear it
            return false;
          },
          [](void* p) { cudaHostUnregister(p); }) {}

HostPins::HostPins(size_t budget_bytes, LockFn lock, UnlockFn unlock)
    : lock_(std::move(lock)), unlock_(std::move(unlock)), budget_(budget_bytes) {}

HostPins::~HostPins() {
  for (const auto& [key, r] : runs_) unlock_(reinterpret_cast<void*>(r.begin));
}

void HostPins::unlock(std::map<uintptr_t, Run>::iterator it) {
  unlock_(reinterpret_cast<void*>(it->second.begin));
  for (uintptr_t at = it->second.first; at <= it->second.last; at += kChunk) chunk_.erase(at);
  locked_ -= it->second.bytes;
  runs_.erase(it);
}

// Registering costs about as much for one chunk as for many (on the H200: 434 us to lock a
// 12.6 MB range in one call), so the chunks a request lacks are locked a run at a time.
bool HostPins::cover(const void* p, size_t bytes, const void* region, size_t region_bytes) {
  if (refused_ || bytes == 0) return !refused_;
  const auto lo = reinterpret_cast<uintptr_t>(region);
  // A mapping holds whole pages: its last one may be locked whole.
  const uintptr_t hi = (lo + region_bytes + kPage - 1) & ~(kPage - 1);
  const auto a = reinterpret_cast<uintptr_t>(p);
  if (a < lo || a + bytes > lo + region_bytes) return false;
  const uintptr_t first = a & ~(kChunk - 1), last = (a + bytes - 1) & ~(kChunk - 1);
  if (((last - first) / kChunk + 1) * kChunk > budget_) return false;
  const uint64_t now = ++tick_;
  for (uintptr_t at = first; at <= last;) {
    if (auto c = chunk_.find(at); c != chunk_.end()) {
      Run& r = runs_.at(c->second);
      if (r.region != region) return false;  // another mapping's end shares the chunk
      r.used = now;
      at += kChunk;
      continue;
    }
    uintptr_t end = at;  // the run of chunks this request lacks from `at`
    while (end + kChunk <= last && !chunk_.count(end + kChunk)) end += kChunk;
    const uintptr_t b = std::max(at, lo), e = std::min(end + kChunk, hi);
    while (locked_ + (e - b) > budget_) {  // the least recently used other run goes
      auto lru = runs_.end();
      for (auto r = runs_.begin(); r != runs_.end(); ++r)
        if (r->second.used != now && (lru == runs_.end() || r->second.used < lru->second.used))
          lru = r;
      if (lru == runs_.end()) return false;
      unlock(lru);
    }
    if (!lock_(reinterpret_cast<void*>(b), e - b)) {
      refused_ = true;
      return false;
    }
    runs_[at] = Run{b, e - b, at, end, region, now};
    for (uintptr_t c = at; c <= end; c += kChunk) chunk_[c] = at;
    locked_ += e - b;
    at = end + kChunk;
  }
  return true;
}

size_t HostPins::locked_from(const void* p) const {
  const auto a = reinterpret_cast<uintptr_t>(p);
  const auto c = chunk_.find(a & ~(kChunk - 1));
  if (c == chunk_.end()) return 0;
  const Run& r = runs_.at(c->second);
  return a >= r.begin && a < r.begin + r.bytes ? r.begin + r.bytes - a : 0;
}

void HostPins::forget(const void* region) {
  for (auto it = runs_.begin(); it != runs_.end();) {
    auto next = std::next(it);
    if (it->second.region == region) unlock(it);
    it = next;
  }
}

}  // namespace channel::cuda
