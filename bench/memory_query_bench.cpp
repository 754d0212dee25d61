// Episodic memory benchmarks, the query: the cosine top-k over 16,384 FP16 centroids of
// hidden 3840: the f16 and int8 scan kernels alone, the scalar f16 reference, building the
// int8 sketch, and EpisodicStore::query end to end (sketch scan + exact rescoring) against
// query_full_scan (the plain f16 scan), on 1 thread and on a pool.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>

#include "backend/cpu/thread_pool.h"
#include "gguf/gguf_writer.h"
#include "kv/kv_rows.h"
#include "memory/centroid_sketch.h"
#include "memory/episodic_store.h"
#include "memory/memory_kernels.h"
#include "memory/rehydrate_kernels.h"
#include "model/model.h"
#include "model/random_model.h"
#include "ops/fp16.h"
#include "runtime/ring_session.h"
#include "util/aligned_vector.h"
#include "util/hash.h"

namespace channel {
namespace {

constexpr size_t kEpisodes = 16384, kHidden = 3840, kStride = 7744;  // index entry bytes

// [kEpisodes][kStride] index-like rows: 64 header bytes then the f16 centroid.
const std::vector<uint8_t>& index_rows() {
  static const std::vector<uint8_t> rows = [] {
    std::vector<uint8_t> r(kEpisodes * kStride);
    std::mt19937 rng(1);
    std::normal_distribution<float> nd;
    for (size_t e = 0; e < kEpisodes; ++e) {
      for (size_t i = 0; i < kHidden; ++i) {
        const uint16_t h = fp32_to_fp16(nd(rng) / 62.0f);
        std::memcpy(&r[e * kStride + 64 + 2 * i], &h, 2);
      }
    }
    return r;
  }();
  return rows;
}

std::vector<float> random_query(size_t n, int seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  std::vector<float> q(n);
  for (auto& x : q) x = nd(rng);
  return q;
}

void BM_CentroidScanKernel(benchmark::State& state) {
  const auto& rows = index_rows();
  const auto q = random_query(kHidden, 2);
  std::vector<float> dots(kEpisodes), n2(kEpisodes);
  for (auto _ : state) {
    centroid_dots(rows.data() + 64, kStride, kEpisodes, q.data(), kHidden, dots.data(), n2.data());
    benchmark::DoNotOptimize(dots.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kEpisodes * kHidden * 2));
  state.SetLabel(memory_kernels_isa());
}
BENCHMARK(BM_CentroidScanKernel)->Unit(benchmark::kMillisecond);

void BM_CentroidScanRef(benchmark::State& state) {
  const auto& rows = index_rows();
  const auto q = random_query(kHidden, 2);
  std::vector<float> dots(kEpisodes), n2(kEpisodes);
  for (auto _ : state) {
    centroid_dots_ref(rows.data() + 64, kStride, kEpisodes, q.data(), kHidden, dots.data(),
                      n2.data());
    benchmark::DoNotOptimize(dots.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kEpisodes * kHidden * 2));
}
BENCHMARK(BM_CentroidScanRef)->Unit(benchmark::kMillisecond)->Iterations(3);

// The int8 scan of 16,384 sketch rows (63 MB), the inner loop of the sketch query.
void BM_Int8ScanKernel(benchmark::State& state) {
  const auto& rows = index_rows();
  CentroidSketch sketch(kEpisodes, kHidden);
  for (size_t e = 0; e < kEpisodes; ++e) {
    sketch.quantize_into(e, reinterpret_cast<const uint16_t*>(rows.data() + e * kStride + 64));
  }
  const auto q = quantize_query(random_query(kHidden, 2));
  std::vector<double> upper(kEpisodes);  // [kEpisodes]
  for (auto _ : state) {
    sketch.upper_bounds(*q, 0, kEpisodes, upper.data());
    benchmark::DoNotOptimize(upper.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kEpisodes * kHidden));
  const Int8DotsVariant* v = nullptr;
  int8_dots_variants(&v);
  state.SetLabel(v[0].isa);
}
BENCHMARK(BM_Int8ScanKernel)->Unit(benchmark::kMillisecond);

// Quantizing every index row into a sketch: what the first query adds to its f16 scan.
void BM_SketchBuild(benchmark::State& state) {
  const auto& rows = index_rows();
  CentroidSketch sketch(kEpisodes, kHidden);
  for (auto _ : state) {
    for (size_t e = 0; e < kEpisodes; ++e) {
      sketch.quantize_into(e, reinterpret_cast<const uint16_t*>(rows.data() + e * kStride + 64));
    }
    benchmark::DoNotOptimize(sketch.row(0));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kEpisodes * kHidden * 2));
}
BENCHMARK(BM_SketchBuild)->Unit(benchmark::kMillisecond);

std::string bench_path(const char* name) {
  return (std::filesystem::temp_directory_path() /
          (std::string("channel_memory_bench_") + std::to_string(::getpid()) + "_" + name))
      .string();
}

// A store of 16,384 live episodes of hidden 3840 (1-token, 1-layer slabs: the index is what
// the query reads). Built once, non-durable.
EpisodicStore& query_store() {
  static std::unique_ptr<EpisodicStore> store = [] {
    const std::string path = bench_path("query.mem");
    std::filesystem::remove(path);
    StoreGeometry g;
    g.num_layers = 1;
    g.hidden_size = kHidden;
    g.kv_dim = 32;
    g.max_episodes = kEpisodes;
    g.max_tokens = 1;
    StoreOptions o;
    o.durable = false;
    auto s = std::make_unique<EpisodicStore>(EpisodicStore::create(path, g, 1, o));
    std::filesystem::remove(path);  // unlinked: the mapping keeps it alive until exit
    std::vector<int32_t> tok = {1};
    std::vector<float> kv(64, 0.25f);
    std::mt19937 rng(3);
    std::normal_distribution<float> nd;
    std::vector<float> c(kHidden);
    for (size_t e = 0; e < kEpisodes; ++e) {
      for (auto& x : c) x = nd(rng) / 62.0f;
      EpisodeRecord r;
      r.tokens = tok;
      r.centroid = c;
      r.kv = kv;
      s->append(r);
    }
    return s;
  }();
  return *store;
}

// Top-8 through the sketch (built by a first query outside the timing; each iteration uses
// another query vector, so no run reuses a cached answer).
void BM_StoreQueryTop8(benchmark::State& state) {
  EpisodicStore& s = query_store();
  const int threads = static_cast<int>(state.range(0));
  ThreadPool pool(threads);
  std::vector<std::vector<float>> qs;
  for (int i = 0; i < 16; ++i) qs.push_back(random_query(kHidden, 4 + i));
  s.query(qs[0], 8, &pool);  // a store's first query only scans,
  s.query(qs[0], 8, &pool);  // the second builds the sketch: both outside the timing
  size_t i = 0;
  for (auto _ : state) {
    auto hits = s.query(qs[i++ % qs.size()], 8, threads > 1 ? &pool : nullptr);
    benchmark::DoNotOptimize(hits.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kEpisodes * kHidden));
  state.counters["threads"] = threads;
}
BENCHMARK(BM_StoreQueryTop8)
    ->Arg(1)
    ->Arg(static_cast<int>(std::max(2u, std::thread::hardware_concurrency())))
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The same top-8 from the plain f16 scan of every centroid, for comparison.
void BM_StoreQueryFullScanTop8(benchmark::State& state) {
  EpisodicStore& s = query_store();
  const int threads = static_cast<int>(state.range(0));
  ThreadPool pool(threads);
  const auto q = random_query(kHidden, 4);
  for (auto _ : state) {
    auto hits = s.query_full_scan(q, 8, threads > 1 ? &pool : nullptr);
    benchmark::DoNotOptimize(hits.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kEpisodes * kHidden * 2));
  state.counters["threads"] = threads;
}
BENCHMARK(BM_StoreQueryFullScanTop8)
    ->Arg(1)
    ->Arg(static_cast<int>(std::max(2u, std::thread::hardware_concurrency())))
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace channel
