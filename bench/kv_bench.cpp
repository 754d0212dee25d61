// KV slot geometry costs: slide (append with span eviction), evict, activate/deactivate
// recall, probe + rollback, building a query's runs, and decode attention over 4096 slots.
// Items are tokens, so items_per_second inverts to the cost per token.
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <vector>

#include "kv/slot_attention.h"
#include "kv/slot_ring.h"
#include "kv/virtual_positions.h"

namespace channel {
namespace {

SlotRing booted(uint32_t anchors = 500) {
  SlotRing ring(RingConfig{4096, 128, 16, 0});
  ring.set_eviction_hook([](const EvictionEvent& ev) { benchmark::DoNotOptimize(ev.span); });
  ring.begin_span(SpanType::system);
  for (uint32_t i = 0; i < anchors; ++i) ring.append_token();
  ring.seal();
  return ring;
}

// Steady state: the window is full, spans of 16 tokens, so every 16th token evicts a span.
void BM_Slide(benchmark::State& state) {
  SlotRing ring = booted();
  uint64_t t = 0;
  for (int i = 0; i < 20000; ++i) {
    if (i % 16 == 0) ring.begin_span(SpanType::response_sentence);
    ring.append_token();
  }
  for (auto _ : state) {
    if (++t % 16 == 0) ring.begin_span(SpanType::response_sentence);
    benchmark::DoNotOptimize(ring.append_token());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Slide);

// Evicting one span of 32 tokens (hook included); refills happen with the timer paused.
void BM_Evict(benchmark::State& state) {
  SlotRing ring = booted();
  const auto refill = [&] {
    while (ring.window_live() + 32 <= ring.window_capacity()) {
      ring.begin_span(SpanType::thought);
      for (int i = 0; i < 32; ++i) ring.append_token();
    }
  };
  refill();
  int64_t tokens = 0;
  for (auto _ : state) {
    if (ring.window_span_count() < 2) {
      state.PauseTiming();
      refill();
      state.ResumeTiming();
    }
    ring.evict_oldest_span();
    tokens += 32;
  }
  state.SetItemsProcessed(tokens);
}
BENCHMARK(BM_Evict);

// Activating and deactivating a recalled episode of 16 tokens (metadata only).
void BM_ActivateRecall(benchmark::State& state) {
  SlotRing ring = booted();
  uint64_t id = 0;
  for (auto _ : state) {
    ++id;
    benchmark::DoNotOptimize(ring.activate_recall(id, 16, 1000 + id));
    ring.deactivate_recall(id);
  }
  state.SetItemsProcessed(state.iterations() * 16);
}
BENCHMARK(BM_ActivateRecall);

// A probe of 8 transient tokens and its rollback.
void BM_ProbeRollback(benchmark::State& state) {
  SlotRing ring = booted();
  ring.begin_span(SpanType::user);
  for (int i = 0; i < 1000; ++i) ring.append_token();
  for (auto _ : state) {
    const ProbeMark mark = ring.begin_probe();
    ring.begin_span(SpanType::thought);
    for (int i = 0; i < 8; ++i) ring.append_token();
    ring.rollback_clock(mark);
  }
  state.SetItemsProcessed(state.iterations() * 8);
}
BENCHMARK(BM_ProbeRollback);

// The runs and virtual positions one query needs (once per token, shared by all layers).
void BM_GlobalRuns(benchmark::State& state) {
  SlotRing ring = booted();
  for (int i = 0; i < 10000; ++i) {
    if (i % 16 == 0) ring.begin_span(SpanType::user);
    ring.append_token();
  }
  for (uint64_t e = 0; e < 4; ++e) ring.activate_recall(e, 16, e * 100);
  std::vector<SlotRun> runs;
  for (auto _ : state) benchmark::DoNotOptimize(global_runs(ring, ring.clock() - 1, runs));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_GlobalRuns);

// Decode attention over a full 4096-slot geometry, Gemma-3-1B head shape (4 heads, 1 KV
// head, head_dim 256), 3 runs (anchors, recall, window). Arg 1 = SIMD, 0 = reference.
void BM_SlotAttention(benchmark::State& state) {
  SlotRing ring = booted();
  for (int i = 0; i < 10000; ++i) {
    if (i % 16 == 0) ring.begin_span(SpanType::user);
    ring.append_token();
  }
  ring.activate_recall(1, 64, 100);
  std::vector<SlotRun> runs;
  const QueryView view = global_runs(ring, ring.clock() - 1, runs);
  const SlotAttnShape shape{4, 1, 256, 4096};
  const RopeFreqs rope = RopeFreqs::make(RopeStyle::neox, 256, 1000000.0);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> k(size_t{4096} * 256), v(k.size()), q(4 * 256), out(q.size());
  for (float& x : k) x = d(rng);
  for (float& x : v) x = d(rng);
  for (float& x : q) x = d(rng);
  SlotAttnScratch scratch;
  for (auto _ : state) {
    if (state.range(0))
      slot_attention(shape, rope, q.data(), k.data(), v.data(), runs, 0.0625f, out.data(), scratch);
    else
      slot_attention_ref(shape, rope, q.data(), k.data(), v.data(), runs, 0.0625f, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["keys"] = view.n_keys;
  state.SetLabel(state.range(0) ? slot_attention_isa() : "reference");
}
BENCHMARK(BM_SlotAttention)->Arg(1)->Arg(0);

}  // namespace
}  // namespace channel
