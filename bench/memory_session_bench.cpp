// Episodic memory on a live session, with the default model (models/channel-default.gguf):
//  - decode tok/s with consolidation on (eviction hook -> staging -> background writer with
//    fdatasync) against the same session without memory, in steady state (the window full,
//    every step evicting);
//  - recalling an episode (query-free: rehydrate from the store + inject into tier 3) against
//    re-prefilling the same tokens, per episode size, with a warm page cache.
// The model path can be overridden with CHANNEL_BENCH_MODEL.
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <unistd.h>

#include "memory/memory_attachment.h"
#include "model/model.h"
#include "runtime/ring_session.h"
#include "util/error.h"

namespace channel {
namespace {

std::shared_ptr<const Model> bench_model() {
  static std::shared_ptr<const Model> m = [] {
    const char* env = std::getenv("CHANNEL_BENCH_MODEL");
    const std::string path =
        env ? env : std::string(CHANNEL_SOURCE_DIR) + "/models/channel-default.gguf";
    return Model::load(path);
  }();
  return m;
}

std::string bench_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("channel_memsession_bench_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

std::vector<int32_t> stream_tokens(size_t n, int n_vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(260 + rng() % static_cast<uint64_t>(n_vocab - 260));
  return t;
}

RingSessionConfig bench_geometry(int threads) {
  RingSessionConfig c;
  c.ring.n_slots = 1024;
  c.ring.n_recall = 256;
  c.n_threads = threads;
  c.n_batch = 64;
  return c;
}

// Decode one token per iteration, in response spans of 16 tokens, with the window full.
// Arg 0: consolidation (0 off, 1 on); arg 1: threads of the session.
void BM_DecodeWithConsolidation(benchmark::State& state) {
  const auto model = bench_model();
  const bool on = state.range(0) != 0;
  const int threads = static_cast<int>(state.range(1));
  RingSession s(model, bench_geometry(threads));
  const auto sys = stream_tokens(32, model->hparams().n_vocab, 1);
  s.append(SpanType::system, sys);
  s.seal();
  const std::string path = bench_path("decode.mem");
  std::filesystem::remove(path);
  std::unique_ptr<EpisodicStore> store;
  std::unique_ptr<MemoryAttachment> mem;
  if (on) {
    store = std::make_unique<EpisodicStore>(
        open_or_create_store(path, *model, 4096, 64));  // durable: fdatasync per episode
    mem = std::make_unique<MemoryAttachment>(s, *store);
  }
  // Fill the window so that every step evicts (about one 16-token span per 16 steps).
  const auto fill = stream_tokens(s.ring().config().n_slots, model->hparams().n_vocab, 2);
  for (size_t i = 0; i < fill.size(); i += 16)
    s.append(SpanType::user, std::span<const int32_t>(fill.data() + i, 16));
  const auto toks = stream_tokens(1 << 16, model->hparams().n_vocab, 3);
  size_t i = 0;
  for (auto _ : state) {
    const int32_t t = toks[i % toks.size()];
    auto logits =
        (i % 16 == 0) ? s.append(SpanType::response_sentence, {&t, 1}) : s.decode({&t, 1});
    benchmark::DoNotOptimize(logits.data());
    ++i;
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
  if (mem) {
    mem->flush();
    const MemoryStats st = mem->stats();
    state.counters["episodes"] = static_cast<double>(st.worker.written);
    state.counters["dropped"] = static_cast<double>(st.worker.dropped);
  }
  mem.reset();
  store.reset();
  std::filesystem::remove(path);
}
BENCHMARK(BM_DecodeWithConsolidation)
    ->ArgsProduct({{0, 1}, {1, 2}})
    ->ArgNames({"consolidate", "threads"})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(3.0)
    ->UseRealTime();

// Recall of an episode of n tokens into a session of the default model (rehydrate from a
// warm store: f16 -> f32, re-rotation, copy into tier 3, access update) against running the
// same n tokens through the model again (a probe: prefill, then rollback).
struct RecallFixture {
  std::string path;
  std::unique_ptr<EpisodicStore> store;
  std::vector<uint64_t> ids;  // episode of kSizes[i] tokens
  static constexpr uint32_t kSizes[] = {16, 64, 256};
  RecallFixture() {
    const auto model = bench_model();
    path = bench_path("recall.mem");
    std::filesystem::remove(path);
    StoreOptions o;
    o.durable = false;
    const StoreGeometry g = session_store_geometry(*model, 8, 256);
    store = std::make_unique<EpisodicStore>(EpisodicStore::create(path, g, 0, o));
    std::mt19937 rng(9);
    std::normal_distribution<float> nd;
    for (uint32_t n : kSizes) {
      const auto tokens = stream_tokens(n, model->hparams().n_vocab, n);
      std::vector<float> centroid(g.hidden_size, 1.0f);
      std::vector<float> kv(2ull * g.num_layers * n * g.kv_dim);  // [L][2][n][kv_dim]
      for (auto& x : kv) x = nd(rng);
      EpisodeRecord r;
      r.start_clock = 5000;
      r.tokens = tokens;
      r.centroid = centroid;
      r.kv = kv;
      ids.push_back(store->append(r));
    }
  }
  ~RecallFixture() { std::filesystem::remove(path); }
};

RecallFixture& recall_fixture() {
  static RecallFixture f;
  return f;
}

size_t size_index(int64_t n) {
  for (size_t i = 0; i < std::size(RecallFixture::kSizes); ++i)
    if (RecallFixture::kSizes[i] == n) return i;
  throw Error("no episode of that size");
}

void BM_RecallEpisode(benchmark::State& state) {
  RecallFixture& f = recall_fixture();
  const auto model = bench_model();
  RingSession s(model, bench_geometry(1));
  const auto sys = stream_tokens(32, model->hparams().n_vocab, 1);
  s.append(SpanType::system, sys);
  s.seal();
  MemoryConfig mc;
  mc.consolidate = false;
  MemoryAttachment mem(s, *f.store, mc);
  const uint64_t id = f.ids[size_index(state.range(0))];
  for (auto _ : state) {
    mem.recall(id);
    state.PauseTiming();
    mem.release_all();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * state.range(0)));
}
BENCHMARK(BM_RecallEpisode)->Arg(16)->Arg(64)->Arg(256)->Unit(benchmark::kMicrosecond);

void BM_RePrefill(benchmark::State& state) {
  const auto model = bench_model();
  const int threads = static_cast<int>(state.range(1));
  RingSessionConfig c = bench_geometry(threads);
  c.ring.probe_reserve = 256;  // a sliding layer holds a probe of at most this many tokens
  RingSession s(model, c);
  const auto sys = stream_tokens(32, model->hparams().n_vocab, 1);
  s.append(SpanType::system, sys);
  s.seal();
  const auto tokens =
      stream_tokens(static_cast<size_t>(state.range(0)), model->hparams().n_vocab, 4);
  for (auto _ : state) {
    auto logits = s.probe(tokens, SpanType::user);
    benchmark::DoNotOptimize(logits.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * state.range(0)));
}
BENCHMARK(BM_RePrefill)
    ->ArgsProduct({{16, 64, 256}, {1, 2}})
    ->ArgNames({"tokens", "threads"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace channel
