// Per-token cost of the bounded attention core versus the window W (ring full, so every
// token attends over S + W keys), next to the naive masked reference at the same W.
#include <cmath>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include "bounded/bounded_attention_core.h"
#include "bounded/bounded_naive.h"
#include "ops/rope.h"

namespace channel {
namespace {

// Gemma3-1B-like head geometry: 4 query heads, 1 KV head, head_dim 256, full rotary, 4 sinks.
constexpr int kHeads = 4, kKvHeads = 1, kHeadDim = 256, kRopeDims = 256, kSinks = 4;

struct Fixture {
  explicit Fixture(int window)
      : rope(window, rope_inv_freq(kRopeDims, 10000.0)), state(kKvHeads, window, kHeadDim) {
    cfg.n_heads = kHeads;
    cfg.n_kv_heads = kKvHeads;
    cfg.head_dim = kHeadDim;
    cfg.rope_dims = kRopeDims;
    cfg.window = window;
    cfg.n_sinks = kSinks;
    cfg.attn_scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
    cfg.rope = &rope;
    std::mt19937 rng(7);
    std::normal_distribution<float> dist;
    auto fill = [&](std::vector<float>& v, size_t n) {
      v.resize(n);
      for (float& x : v) x = dist(rng);
    };
    fill(sink_k, size_t{kKvHeads} * kSinks * kHeadDim);
    fill(sink_v, size_t{kKvHeads} * kSinks * kHeadDim);
    fill(q, size_t{kHeads} * kHeadDim);
    fill(k, size_t{kKvHeads} * kHeadDim);
    fill(v, size_t{kKvHeads} * kHeadDim);
    out.resize(q.size());
    for (int i = 0; i < window; ++i) state.insert(k.data(), v.data());  // fill the ring
  }
  void step() {
    bounded_attend(cfg, sink_k.data(), sink_v.data(), state, q.data(), k.data(), v.data(), 1,
                   out.data());
  }

  BoundedRope rope;
  BoundedAttnCfg cfg;
  BoundedState state;
  std::vector<float> sink_k, sink_v, q, k, v, out;
};

void BM_BoundedDecodeToken(benchmark::State& bs) {
  Fixture f(static_cast<int>(bs.range(0)));
  for (auto _ : bs) {
    f.step();
    benchmark::DoNotOptimize(f.out.data());
  }
  bs.counters["W"] = static_cast<double>(bs.range(0));
  bs.counters["state_KiB"] = static_cast<double>(f.state.bytes()) / 1024.0;
  bs.SetItemsProcessed(bs.iterations());
}
BENCHMARK(BM_BoundedDecodeToken)
    ->RangeMultiplier(4)
    ->Range(64, 16384)
    ->Unit(benchmark::kMicrosecond);

// A 512-token prefill chunk, per token (items = tokens).
void BM_BoundedPrefillChunk(benchmark::State& bs) {
  const int window = static_cast<int>(bs.range(0));
  const int chunk = 512;
  Fixture f(window);
  std::vector<float> q(chunk * f.q.size()), k(chunk * f.k.size()), v(chunk * f.v.size()),
      out(q.size());
  std::mt19937 rng(9);
  std::normal_distribution<float> dist;
  for (auto* buf : {&q, &k, &v}) {
    for (float& x : *buf) x = dist(rng);
  }
  for (auto _ : bs) {
    bounded_attend(f.cfg, f.sink_k.data(), f.sink_v.data(), f.state, q.data(), k.data(), v.data(),
                   chunk, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  bs.SetItemsProcessed(bs.iterations() * chunk);
}
BENCHMARK(BM_BoundedPrefillChunk)
    ->RangeMultiplier(4)
    ->Range(64, 1024)
    ->Unit(benchmark::kMillisecond);

// The naive reference: T = 2W tokens, all scored (masked) in f64 — for scale, not speed.
void BM_BoundedNaiveReference(benchmark::State& bs) {
  const int window = static_cast<int>(bs.range(0));
  const int T = 2 * window;
  Fixture f(window);
  std::vector<float> q(T * f.q.size()), k(T * f.k.size()), v(T * f.v.size()), out(q.size());
  for (auto _ : bs) {
    bounded_attention_naive(f.cfg, 10000.0, f.sink_k.data(), f.sink_v.data(), q.data(), k.data(),
                            v.data(), T, 0, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  bs.SetItemsProcessed(bs.iterations() * T);
}
BENCHMARK(BM_BoundedNaiveReference)->Arg(16)->Arg(64)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace channel
