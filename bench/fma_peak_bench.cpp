// The cores' f32 multiply-add peak: each thread runs twelve independent FMA chains in vector
// registers (AVX-512 where the CPU has it, else AVX2), loading nothing. The ceiling of a
// prompt whose products run f32 FMAs (F32 weights, and F16/BF16 converted to f32 as both
// Channel and llama.cpp do on CPUs without AVX512-FP16): bench/compare_llamacpp.sh reports the
// prompt rates of those types as a share of it, measured in the same round (the clock under
// load moves with the machine). Report: the `flops` counter (best of the repetitions).
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <cstdint>
#include <vector>

#include <benchmark/benchmark.h>

#include "backend/cpu/thread_pool.h"

namespace channel {
namespace {

constexpr int kChains = 12;  // more than an FMA's latency times the pipes that issue it
constexpr int64_t kSteps = int64_t{1} << 15;  // one work item: 393,216 FMAs a lane
constexpr int kItemsPerThread = 64;  // claimed as the threads free up, as a prompt's rows are

#if defined(__x86_64__)
// Twelve chains in named registers (an array with a compiler barrier went to the stack); the
// seed differs per call, so no call can stand in for another.
#define CHANNEL_FMA_CHAINS(V, SET1, FMADD, ADD)                                                 \
  V a0 = SET1(seed), a1 = SET1(seed + 0.01f), a2 = SET1(seed + 0.02f), a3 = SET1(seed + 0.03f); \
  V a4 = SET1(seed + 0.04f), a5 = SET1(seed + 0.05f), a6 = SET1(seed + 0.06f);                  \
  V a7 = SET1(seed + 0.07f), a8 = SET1(seed + 0.08f), a9 = SET1(seed + 0.09f);                  \
  V a10 = SET1(seed + 0.10f), a11 = SET1(seed + 0.11f);                                         \
  const V m = SET1(0.999999f), c = SET1(1e-7f);                                                 \
  for (int64_t i = 0; i < kSteps; ++i) {                                                        \
    a0 = FMADD(a0, m, c), a1 = FMADD(a1, m, c), a2 = FMADD(a2, m, c), a3 = FMADD(a3, m, c);     \
    a4 = FMADD(a4, m, c), a5 = FMADD(a5, m, c), a6 = FMADD(a6, m, c), a7 = FMADD(a7, m, c);     \
    a8 = FMADD(a8, m, c), a9 = FMADD(a9, m, c), a10 = FMADD(a10, m, c);                         \
    a11 = FMADD(a11, m, c);                                                                     \
  }                                                                                             \
  const V s = ADD(ADD(ADD(ADD(a0, a1), ADD(a2, a3)), ADD(ADD(a4, a5), ADD(a6, a7))),            \
                  ADD(ADD(a8, a9), ADD(a10, a11)))

// The chains' result, every lane of it, so that no lane's work can be dropped.
float sum_lanes(const float* v, int n) {
  float r = 0.0f;
  for (int i = 0; i < n; ++i) r += v[i];
  return r;
}

__attribute__((target("avx512f"))) float chains512(float seed) {
  CHANNEL_FMA_CHAINS(__m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps);
  alignas(64) float v[16];
  _mm512_store_ps(v, s);
  return sum_lanes(v, 16);
}

__attribute__((target("avx2,fma"))) float chains256(float seed) {
  CHANNEL_FMA_CHAINS(__m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps);
  alignas(32) float v[8];
  _mm256_store_ps(v, s);
  return sum_lanes(v, 8);
}

#endif

void BM_FmaPeak(benchmark::State& state) {
#if !defined(__x86_64__)
  state.SkipWithError("an x86-64 benchmark (AVX-512 or AVX2 FMA chains)");
  return;
#else
  const bool wide = __builtin_cpu_supports("avx512f");
  if (!wide && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) {
    state.SkipWithError("neither AVX-512 nor AVX2 with FMA on this CPU");
    return;
  }
  const int lanes = wide ? 16 : 8;
  ThreadPool pool(static_cast<int>(state.range(0)));
  std::vector<float> sink(static_cast<size_t>(pool.size()) * 16);  // one cache line each
  const int64_t items = int64_t{kItemsPerThread} * pool.size();
  for (auto _ : state) {
    pool.parallel_for(items, [&](int64_t i0, int64_t i1, int t) {
      for (int64_t i = i0; i < i1; ++i)
        sink[static_cast<size_t>(t) * 16] +=
            wide ? chains512(static_cast<float>(i)) : chains256(static_cast<float>(i));
    });
    benchmark::DoNotOptimize(sink.data());
  }
  const double flops_per_iteration =
      2.0 * kChains * lanes * static_cast<double>(kSteps) * static_cast<double>(items);
  state.counters["flops"] = benchmark::Counter(
      flops_per_iteration * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
#endif
}
BENCHMARK(BM_FmaPeak)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace channel
