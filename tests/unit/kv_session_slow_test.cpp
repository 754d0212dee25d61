// 10^6 tokens through a micro model in a 256-slot geometry (the 4096-slot one is covered by
// kv_positions_slow_test without a model): resident memory stays flat after warm-up (KV
// allocated once), the largest attention distance stays within the geometry, and decoding
// at clock 10^6 is as fast as once the window first filled (printed, not asserted).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "gguf/gguf_writer.h"
#include "model/model.h"
#include "model/random_model.h"
#include "runtime/ring_session.h"
#include "runtime/session.h"

namespace channel {
namespace {

size_t rss_bytes() {
  std::ifstream f("/proc/self/statm");
  size_t pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * 4096;
}

TEST(KvSessionSlow, AMillionTokensInMemoryAllocatedOnce) {
  RandomModelSpec spec;
  spec.arch = Arch::gemma3;
  spec.hidden = 32;
  spec.layers = 3;
  spec.heads = 4;
  spec.kv_heads = 2;
  spec.head_dim = 8;
  spec.ffn = 48;
  spec.window = 16;
  spec.window_pattern = 3;
  spec.vocab = 300;
  ThreadPool build_pool(1);
  GgufWriter w;
  write_random_model(spec, w, build_pool);
  const std::vector<uint8_t> bytes = w.to_bytes();
  const auto model = Model::load_from_memory(bytes, "micro.gguf");

  RingSessionConfig config;
  config.ring = RingConfig{256, 16, 8, 0};
  config.n_threads = 1;
  RingSession session(model, config);
  std::vector<int32_t> system(40);
  for (size_t i = 0; i < system.size(); ++i) system[i] = static_cast<int32_t>(i % 300);
  session.append(SpanType::system, system);
  session.seal();

  constexpr uint64_t kTokens = 1000000;
  size_t rss_warm = 0;
  double rate_early = 0;  // tokens 1000..2000: the window is full from about clock 230
  auto t0 = std::chrono::steady_clock::now();
  int32_t tok = 7;
  for (uint64_t i = 0; i < kTokens; ++i) {
    if (i % 23 == 0) {
      session.append(i % 2 ? SpanType::user : SpanType::response_sentence, {&tok, 1});
    } else {
      session.decode({&tok, 1});
    }
    tok = static_cast<int32_t>((tok * 31 + 17) % 300);
    if (i == 1000) t0 = std::chrono::steady_clock::now();
    if (i == 2000)
      rate_early =
          1000.0 / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (i == 20000) rss_warm = rss_bytes();
    if (i + 1000 == kTokens) t0 = std::chrono::steady_clock::now();
  }
  const double rate_1e6 =
      1000.0 / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const size_t rss_end = rss_bytes();
  std::printf(
      "clock %llu, max distance %llu, evicted spans %llu, kv %zu bytes, rss %zu -> %zu, "
      "tok/s at clock 2e3 %.0f, at 1e6 %.0f\n",
      static_cast<unsigned long long>(session.ring().clock()),
      static_cast<unsigned long long>(session.max_distance()),
      static_cast<unsigned long long>(session.ring().evicted_spans()), session.kv_bytes(), rss_warm,
      rss_end, rate_early, rate_1e6);
  EXPECT_LE(session.max_distance(), config.ring.n_slots);
  EXPECT_LE(rss_end, rss_warm + rss_warm / 100) << "RSS grew by more than 1%";
  EXPECT_GT(session.ring().clock(), kTokens);
}

// The embedded default model (gemma3, 29M parameters, q8_0) through a 1024-slot geometry:
// equal to the plain Session until the first eviction, then thousands of tokens past it.
TEST(KvSessionSlow, DefaultModelMatchesThePlainSessionThenRunsPastTheWindow) {
  const auto path = std::filesystem::path(CHANNEL_SOURCE_DIR) / "models" / "channel-default.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no " << path;
  const auto model = Model::load(path.string());
  RingSessionConfig config;
  config.ring = RingConfig{1024, 64, 8, 0};
  config.n_threads = 2;
  RingSession ring(model, config);
  Session plain(model, SessionConfig{1024, 2, 64});
  std::vector<int32_t> tokens;
  for (int i = 0; i < 4000; ++i) tokens.push_back((i * 7919 + 13) % model->hparams().n_vocab);
  const std::span<const int32_t> all(tokens);
  // q8_0 weights quantize activations to q8_0 blocks: tiny attention differences (f64 vs f32
  // RoPE angles, summation order) occasionally flip a rounding step and move logits by ~1%
  // of their scale (testdata README, "why_quantized_differs").
  const auto close = [](std::span<const float> a, std::span<const float> b, size_t at) {
    double scale = 0, worst = 0, dot = 0, na = 0, nb = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      scale = std::max(scale, double{std::fabs(b[i])});
      worst = std::max(worst, double{std::fabs(a[i] - b[i])});
      dot += double{a[i]} * b[i], na += double{a[i]} * a[i], nb += double{b[i]} * b[i];
    }
    EXPECT_LE(worst, 5e-2 * (1 + scale)) << "token " << at;
    EXPECT_GE(dot / std::sqrt(na * nb), 0.9995) << "token " << at;
  };
  close(ring.append(SpanType::system, all.first(20)), plain.decode(all.first(20)), 20);
  ring.seal();
  size_t i = 20;
  for (; ring.ring().evicted_spans() == 0 && i < 900; ++i) {
    const std::span<const float> got = i % 40 == 20 ? ring.append(SpanType::user, all.subspan(i, 1))
                                                    : ring.decode(all.subspan(i, 1));
    if (ring.ring().evicted_spans() == 0) close(got, plain.decode(all.subspan(i, 1)), i);
  }
  auto t0 = std::chrono::steady_clock::now();
  for (; i < tokens.size(); ++i) {
    if (i == 2000) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("default model: tok/s over clocks 900..2000: %.1f\n", (2000 - 900) / s);
      t0 = std::chrono::steady_clock::now();
    }
    if (i % 40 == 20) {
      ring.append(SpanType::user, all.subspan(i, 1));
    } else {
      ring.decode(all.subspan(i, 1));
    }
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "default model: tok/s over clocks 2000..4000: %.1f, max distance %llu, evicted %llu\n",
      2000 / s, static_cast<unsigned long long>(ring.max_distance()),
      static_cast<unsigned long long>(ring.ring().evicted_spans()));
  EXPECT_LE(ring.max_distance(), 1023u);
  EXPECT_GT(ring.ring().evicted_spans(), 50u);
}

}  // namespace
}  // namespace channel
