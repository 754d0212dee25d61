// Page residency probes (page_residency.h): an RTM transaction over the pages, cachestat(2),
// mincore(2), and a mapping's Rss from /proc/self/smaps.
#include "memory/page_residency.h"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <fstream>
#include <string>
#include <vector>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define CHANNEL_PAGE_PROBE_RTM 1
#endif

namespace channel {

namespace {

uint64_t page_size() {
  static const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  return page;
}

#if defined(CHANNEL_PAGE_PROBE_RTM)
// CPUID leaf 7: EBX bit 11 RTM; EDX bit 11 RTM_ALWAYS_ABORT (microcode that disables it).
bool cpu_has_rtm() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  return (b & (1u << 11)) != 0 && (d & (1u << 11)) == 0;
}

// Not instrumented by sanitizers: their shadow reads could abort the transaction.
__attribute__((target("rtm"), no_sanitize("address", "undefined"))) bool probe_pages(
    uintptr_t begin, uintptr_t end, uintptr_t step) {
  if (_xbegin() != _XBEGIN_STARTED) return false;  // aborted: a fault, an interrupt, ...
  for (uintptr_t a = begin; a < end; a += step) (void)*reinterpret_cast<const volatile char*>(a);
  _xend();
  return true;
}
#endif

// cachestat(2): not in Debian 12's headers. Its number is the same in every table.
struct CachestatRange {
  uint64_t off, len;
};
struct Cachestat {
  uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};
constexpr long kSysCachestat = 451;
std::atomic<bool> cachestat_missing{false};

}  // namespace

bool page_probe_available() {
#if defined(CHANNEL_PAGE_PROBE_RTM)
  static const bool rtm = cpu_has_rtm();
  return rtm;
#else
  return false;
#endif
}

bool pages_mapped(const void* p, size_t n) {
#if defined(CHANNEL_PAGE_PROBE_RTM)
  if (n == 0 || !page_probe_available()) return false;
  const uint64_t page = page_size();
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p) / page * page;
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + n;
  if ((end - begin + page - 1) / page > kMaxProbePages) return false;
  return probe_pages(begin, end, page);
#else
  (void)p;
  (void)n;
  return false;
#endif
}

uint64_t mapping_resident_bytes(const void* start) {
  std::ifstream f("/proc/self/smaps");
  const auto want = reinterpret_cast<uintptr_t>(start);
  std::string line;
  bool in = false;
  while (std::getline(f, line)) {
    // A mapping's first line: "begin-end perms offset dev inode [path]" in hex.
    const size_t dash = line.find('-');
    if (dash != std::string::npos && dash > 0 &&
        std::all_of(line.begin(), line.begin() + static_cast<std::ptrdiff_t>(dash),
                    [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); })) {
      in = std::stoull(line.substr(0, dash), nullptr, 16) == want;
      continue;
    }
    if (in && line.rfind("Rss:", 0) == 0) return std::stoull(line.substr(4)) << 10;  // kB
  }
  return 0;
}

bool pages_cached(int fd, uint64_t off, const void* mapped, uint64_t n) {
  const uint64_t page = page_size();
  const uint64_t begin = off / page * page, end = (off + n + page - 1) / page * page;
  if (end == begin) return true;
#if defined(__linux__)
  if (!cachestat_missing.load(std::memory_order_relaxed)) {
    CachestatRange range{begin, end - begin};
    Cachestat cs{};
    if (::syscall(kSysCachestat, fd, &range, &cs, 0) == 0)
      return cs.nr_cache == (end - begin) / page;
    if (errno == ENOSYS) cachestat_missing.store(true, std::memory_order_relaxed);
  }
#endif
  thread_local std::vector<unsigned char> vec;  // [pages]
  vec.resize((end - begin) / page);
  auto* at = const_cast<char*>(static_cast<const char*>(mapped) - (off - begin));
  if (::mincore(at, end - begin, vec.data()) != 0) return false;
  return std::all_of(vec.begin(), vec.end(), [](unsigned char c) { return (c & 1) != 0; });
}

}  // namespace channel
