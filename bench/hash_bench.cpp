// CRC-32C throughput (util/hash.h): crc32c (three interleaved crc32 streams joined by a
// PCLMULQDQ shift) against the single-stream loop it replaced, kept here as the baseline.
#include <cstring>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#if defined(__SSE4_2__)
#include <immintrin.h>  // the single-stream baseline
#endif

#include "util/hash.h"

namespace channel {
namespace {

#if defined(__SSE4_2__)
uint32_t crc32c_single_stream(uint32_t crc, const uint8_t* p, size_t n) {
  uint64_t c = ~crc;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    c = _mm_crc32_u64(c, w);
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  for (; n > 0; --n, ++p) c32 = _mm_crc32_u8(c32, *p);
  return ~c32;
}
#else
uint32_t crc32c_single_stream(uint32_t crc, const uint8_t* p, size_t n) {
  return crc32c_ref(crc, p, n);
}
#endif

void BM_Crc32c(benchmark::State& state) {
  const bool single = state.range(0) == 0;
  const size_t n = static_cast<size_t>(state.range(1));
  std::vector<uint8_t> buf(n);  // [n] random bytes
  std::mt19937 rng(7);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  uint32_t crc = 0;
  for (auto _ : state) {
    crc = single ? crc32c_single_stream(crc, buf.data(), n) : crc32c(crc, buf.data(), n);
    benchmark::DoNotOptimize(crc);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(n));
  state.SetLabel(single ? "single-stream" : "3-stream");
}
BENCHMARK(BM_Crc32c)
    ->ArgsProduct({{0, 1}, {1 << 10, 16 << 10, 1 << 20, 16 << 20}})
    ->ArgNames({"variant", "bytes"});

}  // namespace
}  // namespace channel
