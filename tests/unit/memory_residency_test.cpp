// Page residency probes (memory/page_residency.h): pages_mapped never says yes for a page this
// process has not mapped (it must not fault a cold page in), says yes for mapped pages where
// the CPU has RTM, pages_cached sees pages the process has just written, and
// mapping_resident_bytes counts what a mapping holds in this process.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "memory/page_residency.h"
#include "memory_test_util.h"

namespace channel {
namespace {

struct MappedFile {
  int fd = -1;
  uint8_t* map = nullptr;
  size_t size = 0;
  MappedFile(const std::string& path, size_t bytes) : size(bytes) {
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
    std::vector<uint8_t> data(bytes, 7);
    EXPECT_EQ(::pwrite(fd, data.data(), bytes, 0), static_cast<ssize_t>(bytes));
    void* p = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
    map = p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
  }
  ~MappedFile() {
    if (map) ::munmap(map, size);
    ::close(fd);
  }
};

TEST(PageResidency, MappedOnlyForPagesTouchedThroughTheMapping) {
  test::ScratchDir dir;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  MappedFile f(dir.file("pages.bin"), 64 * page);
  ASSERT_NE(f.map, nullptr);
  const uint8_t* range = f.map + 8 * page + 100;  // 5 pages, starting mid-page
  const size_t n = 4 * page;
  EXPECT_FALSE(pages_mapped(range, n));  // never touched: not in this process's page tables
  EXPECT_FALSE(pages_mapped(range, 0));
  volatile uint8_t sum = 0;
  for (size_t off = 0; off < n; off += page / 2) sum = sum + range[off];
  sum = sum + range[n - 1];
  for (int attempt = 0; attempt < 50 && !pages_mapped(range, n); ++attempt) {
  }  // an interrupt may abort a probe now and then
  EXPECT_EQ(pages_mapped(range, n), page_probe_available());
  // One page past the touched ones (never touched, and beyond fault-around) is not mapped.
  EXPECT_FALSE(pages_mapped(f.map + 40 * page, page));
  // Unmapped again (the pages stay cached): not mapped, but cached.
  ASSERT_EQ(::madvise(f.map, f.size, MADV_DONTNEED), 0);
  EXPECT_FALSE(pages_mapped(range, n));
  EXPECT_TRUE(pages_cached(f.fd, static_cast<uint64_t>(range - f.map), range, n));
}

TEST(PageResidency, MappingResidentBytesCountsTouchedPages) {
  test::ScratchDir dir;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  MappedFile f(dir.file("rss.bin"), 256 * page);
  ASSERT_NE(f.map, nullptr);
  EXPECT_EQ(mapping_resident_bytes(f.map), 0u);
  volatile uint8_t sum = 0;
  for (size_t i = 0; i < 256; i += 2) sum = sum + f.map[i * page];
  EXPECT_GE(mapping_resident_bytes(f.map), 128 * page);
  ASSERT_EQ(::madvise(f.map, f.size, MADV_DONTNEED), 0);
  EXPECT_EQ(mapping_resident_bytes(f.map), 0u);
  EXPECT_EQ(mapping_resident_bytes(f.map + page), 0u);  // not the start of a mapping
}

TEST(PageResidency, TooManyPagesIsNeverMapped) {
  test::ScratchDir dir;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t pages = kMaxProbePages + 2;
  MappedFile f(dir.file("big.bin"), pages * page);
  ASSERT_NE(f.map, nullptr);
  volatile uint8_t sum = 0;
  for (size_t i = 0; i < pages; ++i) sum = sum + f.map[i * page];
  EXPECT_FALSE(pages_mapped(f.map, pages * page));
  EXPECT_TRUE(pages_cached(f.fd, 0, f.map, pages * page));
  EXPECT_TRUE(pages_cached(f.fd, 0, f.map, 0));
}

}  // namespace
}  // namespace channel
