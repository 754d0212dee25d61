// Episodic memory benchmarks, recall: an episode read + f16 -> f32 + Givens re-rotation of
// every layer's keys + written into a live session's recall slots, against a raw sequential
// pread of the same bytes from the same file, per episode size (16, 64, 256 tokens), with a
// warm and a cold page cache, for spec 003's 12B geometry (48 layers x kv_dim 1024) and
// Channel's default model (2 global layers x kv_dim 128).
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
#include "kv/kv_rows.h"
#include "memory/centroid_sketch.h"
#include "memory/episodic_store.h"
#include "memory/memory_kernels.h"
#include "memory/rehydrate_kernels.h"
#include "model/model.h"
#include "ops/fp16.h"
#include "recall_geometry_model.h"
#include "runtime/ring_session.h"
#include "util/aligned_vector.h"
#include "util/hash.h"

namespace channel {
namespace {
std::string bench_path(const char* name) {
  return (std::filesystem::temp_directory_path() /
          (std::string("channel_memory_bench_") + std::to_string(::getpid()) + "_" + name))
      .string();
}

// --- rehydration -----------------------------------------------------------------------------
// Issue 5, point 8: recalling an episode (read from the store + f16 -> f32 + re-rotation of the
// keys + writing into the session's recall slots) against a raw sequential pread of the same
// K/V bytes from the same file. Two geometries: the spec's 12B model (48 layers x kv_dim 1024,
// 8 KV heads of 128) and Channel's default model as a session stores it (its 2 global layers x
// kv_dim 128, 2 KV heads of 64); episodes of 16, 64 and 256 tokens.
//  - BM_RawRead: one pread of the episode's K/V bytes into a reused buffer (1 thread).
//  - BM_Recall: the whole recall path into a live RingSession (a random-weight model of that
//    geometry, every layer global): RingSession::inject_recall activates the episode and the
//    store writes its rows straight into the recall slots of the f32 arenas
//    ([n_kv_heads][n_slots][head_dim] per layer), with MemoryAttachment::recall's options (the
//    rotation table; `threads` > 1: the store splits episodes of >= 1 MiB over a pool of that
//    many threads, the calling thread included). Each iteration also releases the episode
//    again (counted in the time).
//  - BM_Rehydrate: the store call alone into dense [L][n][kv_dim] buffers (1 thread).
//  - BM_RehydrateKernel / BM_CopyKv: the convert+rotate kernel alone over the episode's f16
//    bytes in memory into arena rows (normal or non-temporal stores), and a memcpy of the
//    same f16 bytes: what the stores cost on this machine.
// Warm: the page cache holds the file. Cold: before each iteration (outside the timing) the
// pages of the episode's K/V bytes, rounded out to whole pages, are unmapped from the store
// and dropped from the page cache (EpisodicStore::evict_pages + posix_fadvise DONTNEED, retried
// until mincore sees none) on both sides alike; the index stays cached, as it is after the
// query that picks the episode. `resident`: pages per iteration still cached after the drop
// (non-zero means the drop did not work, e.g. on tmpfs: point TMPDIR at a disk).
struct Geometry {
  uint32_t layers, kv_dim, heads, head_dim;
};
constexpr Geometry kGeometries[] = {{48, 1024, 8, 128}, {2, 128, 2, 64}};
constexpr int kSizes[] = {16, 64, 256};

std::shared_ptr<const Model> geometry_model(const Geometry& g) {
  return bench::recall_geometry_model(g.layers, g.heads, g.head_dim);
}

struct RehydrateFixture {
  std::string path;
  std::unique_ptr<EpisodicStore> store;
  int fd = -1;
  uint8_t* map = nullptr;  // [map_size] for mincore
  size_t map_size = 0;
  Geometry geo;
  uint32_t n_fill = 0;  // filler episodes before the measured ones
  std::shared_ptr<const Model> model;
  std::unique_ptr<RingSession> session;
  RotaryDims rope;  // the session's global rope, as MemoryAttachment builds it
  std::unique_ptr<RotationTable> table;

  explicit RehydrateFixture(int gi) : geo(kGeometries[gi]) {
    path = bench_path(("rehydrate" + std::to_string(gi) + ".mem").c_str());
    std::filesystem::remove(path);
    StoreGeometry g;
    g.num_layers = geo.layers;
    g.hidden_size = 64;
    g.kv_dim = geo.kv_dim;
    g.max_tokens = 256;
    // 1-token fillers first, so that the measured slabs start >= 4 MiB after the index: a
    // large page-cache folio holding index pages (mapped, so never dropped) and slab pages
    // would keep the slab cached.
    g.max_episodes = 1;
    const uint64_t stride = make_layout(g, "bench").block_stride;
    n_fill = static_cast<uint32_t>(((4u << 20) + stride - 1) / stride);
    g.max_episodes = n_fill + 3;
    StoreOptions o;
    o.durable = false;
    store = std::make_unique<EpisodicStore>(EpisodicStore::create(path, g, 1, o));
    std::mt19937 rng(5);
    std::normal_distribution<float> nd;
    std::vector<float> c(64, 1.0f);
    for (uint32_t i = 0; i < n_fill; ++i) {
      const std::vector<int32_t> tok = {7};
      const std::vector<float> kv(2ull * geo.layers * geo.kv_dim, 0.5f);
      EpisodeRecord r;
      r.tokens = tok;
      r.centroid = c;
      r.kv = kv;
      store->append(r);
    }
    for (int n : kSizes) {
      std::vector<int32_t> tok(static_cast<size_t>(n), 7);
      std::vector<float> kv(2ull * geo.layers * static_cast<size_t>(n) * geo.kv_dim);
      for (auto& x : kv) x = nd(rng);
      EpisodeRecord r;
      r.start_clock = 123456;
      r.tokens = tok;
      r.centroid = c;
      r.kv = kv;
      store->append(r);  // ids (= slots) n_fill + 0..2: sizes 16, 64, 256
    }
    store->sync();
    fd = ::open(path.c_str(), O_RDONLY);
    map_size = store->layout().file_size;
    void* p = ::mmap(nullptr, map_size, PROT_READ, MAP_SHARED, fd, 0);
    map = p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);

    model = geometry_model(geo);
    RingSessionConfig sc;
    sc.ring.n_slots = 512;
    sc.ring.n_recall = 256;
    sc.n_threads = 1;
    sc.n_batch = 8;
    session = std::make_unique<RingSession>(model, sc);
    const std::vector<int32_t> anchors = {2, 40, 41, 42};
    session->append(SpanType::system, anchors);
    session->seal();
    const RopeFreqs& rf = session->rope_global();
    rope.style = rf.style;
    rope.head_dim = geo.head_dim;
    rope.n_heads = geo.heads;
    rope.n_rot = rf.n_rot;
    rope.inv_freq = rf.inv_freq;
    table = std::make_unique<RotationTable>(rope);
  }
  // [begin, end) of the episode's K/V bytes, rounded out to whole pages.
  std::pair<uint64_t, uint64_t> kv_pages(uint64_t slot, uint64_t n) const {
    const StoreLayout& L = store->layout();
    const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    const uint64_t b = L.block_offset(slot) + L.block_kv, e = b + L.kv_bytes(n);
    return {b & ~(page - 1), (e + page - 1) & ~(page - 1)};
  }
  // Pages of the episode's K/V bytes in the page cache now.
  size_t resident(uint64_t slot, uint64_t n) const {
    if (!map) return 0;
    const auto [b, e] = kv_pages(slot, n);
    const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    std::vector<unsigned char> vec((e - b) / page);
    if (::mincore(map + b, e - b, vec.data()) != 0) return 0;
    size_t count = 0;
    for (unsigned char v : vec) count += v & 1;
    return count;
  }
  uint64_t id(int64_t n) const { return n_fill + (n == 16 ? 0 : n == 64 ? 1 : 2); }
  // Drops the K/V pages of every measured episode from the store's mapping (a large folio
  // is only dropped when no part of it is mapped) and the page cache, retrying a few times (a
  // page still on a per-CPU LRU list escapes the first drop); returns how many pages of the
  // episode of n tokens stayed resident.
  size_t drop(int64_t n) const {
    size_t left = 0;
    for (int attempt = 0; attempt < 20; ++attempt) {
      for (int size : kSizes) {
        const auto [b, e] = kv_pages(id(size), static_cast<uint64_t>(size));
        store->evict_pages(id(size));
        ::posix_fadvise(fd, static_cast<off_t>(b), static_cast<off_t>(e - b), POSIX_FADV_DONTNEED);
      }
      left = resident(id(n), static_cast<uint64_t>(n));
      if (left == 0) break;
      ::usleep(200);
    }
    return left;
  }
  ~RehydrateFixture() {
    if (map) ::munmap(map, map_size);
    ::close(fd);
    std::filesystem::remove(path);
  }
};

RehydrateFixture& rehydrate_fixture(int gi) {
  static RehydrateFixture f0(0), f1(1);
  return gi == 0 ? f0 : f1;
}

// Args: geometry index, tokens, cold (0/1).
void BM_RawRead(benchmark::State& state) {
  RehydrateFixture& f = rehydrate_fixture(static_cast<int>(state.range(0)));
  const int64_t n = state.range(1);
  const bool cold = state.range(2) != 0;
  const StoreLayout& L = f.store->layout();
  const uint64_t slot = f.id(n);  // ids are slots
  std::vector<uint8_t> buf(L.kv_bytes(static_cast<uint64_t>(n)));
  size_t resident = 0;
  for (auto _ : state) {
    if (cold) {
      state.PauseTiming();
      resident += f.drop(n);
      state.ResumeTiming();
    }
    const ssize_t got = ::pread(f.fd, buf.data(), buf.size(),
                                static_cast<off_t>(L.block_offset(slot) + L.block_kv));
    if (got != static_cast<ssize_t>(buf.size())) state.SkipWithError("short read");
    benchmark::DoNotOptimize(buf.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * buf.size()));
  state.counters["threads"] = 1;
  state.counters["resident"] =
      benchmark::Counter(static_cast<double>(resident), benchmark::Counter::kAvgIterations);
}

// Args: geometry index, tokens, cold (0/1), threads.
void BM_Recall(benchmark::State& state) {
  RehydrateFixture& f = rehydrate_fixture(static_cast<int>(state.range(0)));
  const int64_t n = state.range(1);
  const bool cold = state.range(2) != 0;
  const int threads = static_cast<int>(state.range(3));
  ThreadPool pool(threads);
  const uint64_t id = f.id(n);
  RingSession& s = *f.session;
  const uint64_t stored_pos = s.ring().n_sys();
  const double delta = static_cast<double>(stored_pos) - 123456.0;
  RehydrateOptions ro;
  ro.verify = false;  // as the raw read: no checksum (BM_RehydrateVerified shows its cost)
  ro.tables = {f.table.get(), 1};
  ro.pool = threads > 1 ? &pool : nullptr;
  size_t resident = 0;
  for (auto _ : state) {
    if (cold) {
      state.PauseTiming();
      resident += f.drop(n);
      state.ResumeTiming();
    }
    s.inject_recall(id, static_cast<uint32_t>(n), stored_pos, [&](const KvRowsF16& out) {
      f.store->rehydrate(id, {&f.rope, 1}, delta, out, ro);
    });
    s.release_recall(id);
  }
  state.SetBytesProcessed(static_cast<int64_t>(
      state.iterations() * f.store->layout().kv_bytes(static_cast<uint64_t>(n))));
  state.counters["threads"] = threads;
  state.counters["resident"] =
      benchmark::Counter(static_cast<double>(resident), benchmark::Counter::kAvgIterations);
}

// Args: geometry index, tokens, threads. Cold recall and cold raw read paired: every iteration
// drops the episode's pages, times one raw pread, drops them again and times one recall (as
// BM_Recall), so that both see the same disk at the same moment (separate cold runs of the two
// drift apart on a shared VM). Reports both means and their ratio; the iteration time is the
// sum of the two.
void BM_RecallColdPaired(benchmark::State& state) {
  RehydrateFixture& f = rehydrate_fixture(static_cast<int>(state.range(0)));
  const int64_t n = state.range(1);
  const int threads = static_cast<int>(state.range(2));
  ThreadPool pool(threads);
  const uint64_t id = f.id(n);
  RingSession& s = *f.session;
  const uint64_t stored_pos = s.ring().n_sys();
  const double delta = static_cast<double>(stored_pos) - 123456.0;
  RehydrateOptions ro;
  ro.verify = false;
  ro.tables = {f.table.get(), 1};
  ro.pool = threads > 1 ? &pool : nullptr;
  const StoreLayout& L = f.store->layout();
  std::vector<uint8_t> buf(L.kv_bytes(static_cast<uint64_t>(n)));
  double raw_s = 0, recall_s = 0;
  size_t resident = 0;
  using Clock = std::chrono::steady_clock;
  for (auto _ : state) {
    resident += f.drop(n);
    const auto t0 = Clock::now();
    const ssize_t got =
        ::pread(f.fd, buf.data(), buf.size(), static_cast<off_t>(L.block_offset(id) + L.block_kv));
    const auto t1 = Clock::now();
    if (got != static_cast<ssize_t>(buf.size())) state.SkipWithError("short read");
    benchmark::DoNotOptimize(buf.data());
    resident += f.drop(n);
    const auto t2 = Clock::now();
    s.inject_recall(id, static_cast<uint32_t>(n), stored_pos, [&](const KvRowsF16& out) {
      f.store->rehydrate(id, {&f.rope, 1}, delta, out, ro);
    });
    const auto t3 = Clock::now();
    s.release_recall(id);
    const double raw = std::chrono::duration<double>(t1 - t0).count();
    const double recall = std::chrono::duration<double>(t3 - t2).count();
    raw_s += raw;
    recall_s += recall;
    state.SetIterationTime(raw + recall);
  }
  const auto it = static_cast<double>(state.iterations());
  state.counters["raw_us"] = raw_s / it * 1e6;
  state.counters["recall_us"] = recall_s / it * 1e6;
  state.counters["recall_over_raw"] = recall_s / raw_s;
  state.counters["resident"] = static_cast<double>(resident) / it;
}

void rehydrate_bench(benchmark::State& state, bool verify) {
  RehydrateFixture& f = rehydrate_fixture(static_cast<int>(state.range(0)));
  const int64_t n = state.range(1);
  const bool cold = state.range(2) != 0;
  std::vector<float> k(static_cast<size_t>(f.geo.layers) * static_cast<size_t>(n) * f.geo.kv_dim),
      v(k.size());
  size_t resident = 0;
  for (auto _ : state) {
    if (cold) {
      state.PauseTiming();
      resident += f.drop(n);
      state.ResumeTiming();
    }
    f.store->rehydrate(f.id(n), {&f.rope, 1}, -123456.0, k.data(), v.data(), verify);
    benchmark::DoNotOptimize(k.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(
      state.iterations() * f.store->layout().kv_bytes(static_cast<uint64_t>(n))));
  state.counters["threads"] = 1;
  state.counters["resident"] =
      benchmark::Counter(static_cast<double>(resident), benchmark::Counter::kAvgIterations);
}
void BM_Rehydrate(benchmark::State& state) {
  rehydrate_bench(state, false);
}
void BM_RehydrateVerified(benchmark::State& state) {
  rehydrate_bench(state, true);
}

// Args: geometry index, tokens, stream (0/1). The episode's K/V as the slab holds them
// ([L][2][n][kv_dim] f16) into 64-byte aligned arenas of 512 slots, rows from slot 256.
void BM_RehydrateKernel(benchmark::State& state) {
  const Geometry& g = kGeometries[state.range(0)];
  const auto n = static_cast<size_t>(state.range(1));
  const size_t row = g.kv_dim, slots = 512, first = 256;
  std::vector<uint16_t> src(2 * g.layers * n * row);  // [L][2][n][kv_dim]
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  for (auto& x : src) x = fp32_to_fp16(nd(rng));
  std::vector<AlignedVector<float>> k(g.layers, AlignedVector<float>(g.heads * slots * g.head_dim));
  std::vector<AlignedVector<float>> v = k;
  std::vector<float> c(g.head_dim, 0.6f), s(g.head_dim, 0.8f);
  const HeadRotation rot{false, g.head_dim, c.data(), s.data()};
  RowLayout lay{g.heads, g.head_dim, g.head_dim, slots * g.head_dim};
  lay.stream = state.range(2) != 0;
  for (auto _ : state) {
    for (uint32_t l = 0; l < g.layers; ++l) {
      f16_rows_to_f32(&rot, src.data() + 2 * l * n * row, n, lay, k[l].data() + first * g.head_dim);
      f16_rows_to_f32(nullptr, src.data() + (2 * l + 1) * n * row, n, lay,
                      v[l].data() + first * g.head_dim);
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * src.size() * 2));
  state.SetLabel(rehydrate_kernels_isa());
}

// Args: geometry index, tokens. The f16 recall tier's kernel alone: keys rotated f16 -> f16,
// values copied, from the slab's bytes in memory into token-major f16 rows.
void BM_RehydrateKernelF16(benchmark::State& state) {
  const Geometry& g = kGeometries[state.range(0)];
  const auto n = static_cast<size_t>(state.range(1));
  const size_t plane = n * g.kv_dim;
  std::vector<uint16_t> src(2 * g.layers * plane);  // [L][2][n][kv_dim]
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  for (auto& x : src) x = fp32_to_fp16(nd(rng));
  std::vector<AlignedVector<uint16_t>> dst(2 * g.layers, AlignedVector<uint16_t>(256 * g.kv_dim));
  std::vector<float> c(g.head_dim, 0.6f), s(g.head_dim, 0.8f);
  const HeadRotation rot{false, g.head_dim, c.data(), s.data()};
  for (auto _ : state) {
    for (uint32_t l = 0; l < g.layers; ++l) {
      f16_rows_to_f16(&rot, src.data() + 2 * l * plane, n, g.heads, g.head_dim, dst[2 * l].data());
      std::memcpy(dst[2 * l + 1].data(), src.data() + (2 * l + 1) * plane, plane * 2);
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * src.size() * 2));
  state.SetLabel(rehydrate_kernels_isa());
}

// Args: geometry index, tokens. What a recall costs besides reading and writing rows:
// RingSession::inject_recall with a fill that writes nothing, then release_recall.
void BM_RecallBookkeeping(benchmark::State& state) {
  RehydrateFixture& f = rehydrate_fixture(static_cast<int>(state.range(0)));
  const auto n = static_cast<uint32_t>(state.range(1));
  RingSession& s = *f.session;
  for (auto _ : state) {
    s.inject_recall(f.id(n), n, s.ring().n_sys(), [](const KvRowsF16&) {});
    s.release_recall(f.id(n));
  }
}

// Args: geometry index, tokens, cold. EpisodicStore::rehydrate into f16 rows of a plain buffer
// (no session), with the rotation table and no checksum, as BM_Recall calls it.
void BM_RehydrateF16(benchmark::State& state) {
  RehydrateFixture& f = rehydrate_fixture(static_cast<int>(state.range(0)));
  const int64_t n = state.range(1);
  const bool cold = state.range(2) != 0;
  const uint32_t L = f.geo.layers, D = f.geo.kv_dim;
  std::vector<AlignedVector<uint16_t>> rows(2 * L, AlignedVector<uint16_t>(256 * D));
  std::vector<uint16_t*> kp, vp;
  for (uint32_t l = 0; l < L; ++l) {
    kp.push_back(rows[2 * l].data());
    vp.push_back(rows[2 * l + 1].data());
  }
  RehydrateOptions ro;
  ro.verify = false;
  ro.tables = {f.table.get(), 1};
  size_t resident = 0;
  for (auto _ : state) {
    if (cold) {
      state.PauseTiming();
      resident += f.drop(n);
      state.ResumeTiming();
    }
    f.store->rehydrate(f.id(n), {&f.rope, 1}, -123456.0, KvRowsF16{kp, vp, D, 256}, ro);
    benchmark::ClobberMemory();
  }
  state.counters["resident"] =
      benchmark::Counter(static_cast<double>(resident), benchmark::Counter::kAvgIterations);
}

// Args: geometry index, tokens. memcpy of the episode's f16 K/V bytes (in memory).
void BM_CopyKv(benchmark::State& state) {
  const Geometry& g = kGeometries[state.range(0)];
  const auto n = static_cast<size_t>(state.range(1));
  std::vector<uint8_t> src(2 * g.layers * n * g.kv_dim * 2, 1), dst(src.size());
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), src.size());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * src.size()));
}

void rehydrate_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"geometry", "tokens", "cold"});
  for (int g : {0, 1})
    for (int n : kSizes)
      for (int cold : {0, 1}) b->Args({g, n, cold});
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
}
void recall_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"geometry", "tokens", "cold", "threads"});
  for (int g : {0, 1})
    for (int n : kSizes)
      for (int cold : {0, 1})
        for (int t : {1, 2}) b->Args({g, n, cold, t});
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
}
BENCHMARK(BM_RawRead)->Apply(rehydrate_args);
BENCHMARK(BM_Recall)->Apply(recall_args);
BENCHMARK(BM_Rehydrate)->Apply(rehydrate_args);
BENCHMARK(BM_RecallColdPaired)
    ->ArgsProduct({{0, 1}, {16, 64, 256}, {1, 2}})
    ->ArgNames({"geometry", "tokens", "threads"})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RehydrateKernel)
    ->ArgsProduct({{0, 1}, {16, 64, 256}, {0, 1}})
    ->ArgNames({"geometry", "tokens", "stream"})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RehydrateKernelF16)
    ->ArgsProduct({{0, 1}, {16, 64, 256}})
    ->ArgNames({"geometry", "tokens"})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RecallBookkeeping)
    ->ArgsProduct({{0, 1}, {16, 64, 256}})
    ->ArgNames({"geometry", "tokens"})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RehydrateF16)->Apply(rehydrate_args);
BENCHMARK(BM_CopyKv)
    ->ArgsProduct({{0, 1}, {16, 64, 256}})
    ->ArgNames({"geometry", "tokens"})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RehydrateVerified)->Apply(rehydrate_args);

}  // namespace
}  // namespace channel
