// Read bandwidth of this machine: threads sum a 512 MiB buffer (far larger than any cache)
// with 64-byte loads, the access pattern of a decode step's weight stream. The yardstick of
// the generation rates in bench/compare_llamacpp.sh ("% of the read bandwidth"); report
// bytes_per_second (best of the repetitions: the machine is shared).
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include <benchmark/benchmark.h>

#include "backend/cpu/thread_pool.h"

namespace channel {
namespace {

constexpr size_t kBytes = size_t{512} << 20;
constexpr size_t kChunk = size_t{1} << 20;  // bytes per unit of work

struct Buffer {
  std::unique_ptr<uint64_t[]> data;
  Buffer() : data(new uint64_t[kBytes / 8]) {
    for (size_t i = 0; i < kBytes / 8; ++i) data[i] = i * 0x9E3779B97F4A7C15ull;
  }
};

// Sums the 8-byte words of [p, p + n): eight independent lanes, so the compiler emits one
// wide load and add per cache line and the loop is bound by memory, not by the adds.
uint64_t sum_words(const uint64_t* p, size_t n) {
  uint64_t acc[8] = {};
  for (size_t i = 0; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += p[i + j];
  uint64_t s = 0;
  for (uint64_t v : acc) s += v;
  return s;
}

void BM_ReadBandwidth(benchmark::State& state) {
  static Buffer buf;
  ThreadPool pool(static_cast<int>(state.range(0)));
  const int64_t chunks = static_cast<int64_t>(kBytes / kChunk);
  std::vector<uint64_t> sums(static_cast<size_t>(pool.size()) * 8);  // one cache line each
  for (auto _ : state) {
    pool.parallel_for(chunks, [&](int64_t c0, int64_t c1, int t) {
      uint64_t s = 0;
      for (int64_t c = c0; c < c1; ++c)
        s += sum_words(buf.data.get() + c * (kChunk / 8), kChunk / 8);
      sums[static_cast<size_t>(t) * 8] += s;
    });
    benchmark::DoNotOptimize(sums.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(kBytes));
}
BENCHMARK(BM_ReadBandwidth)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace channel
