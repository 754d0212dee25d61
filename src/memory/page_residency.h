// page_residency.h: whether a range of a file mapping can be read without going to disk, so
// that recall picks the cheaper way to read a record: through the mapping when its pages are
// in memory, with preadv straight into the destination when they are not (a page fault on a
// cold mapping reads 128 KiB around itself and then a few pages per fault).
#pragma once

#include <cstddef>
#include <cstdint>

namespace channel {

// True only if every page of [p, p + n) is mapped in this process at the moment of the call,
// learned without a system call: one byte per page is loaded inside a hardware transaction
// (Intel RTM), which a page fault aborts without the fault ever being taken, so a cold page is
// never read in. False whenever unsure: no RTM on this CPU or build, more than kMaxPages pages,
// or an abort for any other reason (an interrupt, say). A mapped page is resident: the kernel
// unmaps a page before it evicts it.
bool pages_mapped(const void* p, size_t n);
inline constexpr size_t kMaxProbePages = 256;

// The Rss of this process's mapping that starts at `start` (its /proc/self/smaps entry), in
// bytes; 0 when there is none or the file cannot be read.
uint64_t mapping_resident_bytes(const void* start);

// Whether pages_mapped can ever answer true here (RTM present and compiled in).
bool page_probe_available();

// True when every page of the file range [off, off + n) of `fd` is in the page cache:
// cachestat(2) (Linux 6.5; about 0.15 us), else mincore(2) on the same range mapped at
// `mapped` (the address of byte `off`). False when neither can tell.
bool pages_cached(int fd, uint64_t off, const void* mapped, uint64_t n);

}  // namespace channel
