// Ring ingestion (`channel stream -f`, the always-on path of a long text into the window):
// tokens per second once the 4096-slot window is full, batched against the schedule it
// replaced, measured in the same run.
//
//  - batched: RingSession::feed, as StreamSession::feed calls it: one call per piece of 64
//    tokens (cmd_stream's kFeedChunk), sentence starts marked, forward chunks of n_batch (64)
//    across sentence ends and evictions, logits only for the piece's last token;
//  - baseline: the schedule before feed(): one append()/decode() call per sentence, and once
//    the window was full each call cut into chunks of min(n_batch, max(room, probe_reserve
//    + 1)) tokens (room: free window slots before the chunk), every chunk computing its last
//    token's logits. Driven here through append()/decode() with those chunk sizes, each of
//    which runs as one forward chunk, so the baseline does the old schedule's work.
//
// Both sessions read the same text (train/results/heldout.txt, or CHANNEL_BENCH_TEXT) in
// alternating blocks of 256 tokens, each block timed on its own, so that the drift of a
// shared machine hits both alike. Geometry of `channel stream --memory`: 4096 slots, 256
// recall, probe reserve 1. memory = 1 attaches an episodic store to each session (eviction
// hook, staging, background writer); each block then also waits for its writer to finish
// the episodes cut so far. Model: models/channel-bounded.gguf, or CHANNEL_BENCH_MODEL.
// Counters: baseline_tok_s, batched_tok_s and speedup (batched / baseline).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>
#include <unistd.h>

#include "kv/sentence_split.h"
#include "memory/memory_attachment.h"
#include "model/model.h"
#include "runtime/ring_session.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace channel {
namespace {

constexpr size_t kBlock = 256;
constexpr size_t kPiece = 64;  // cmd_stream's kFeedChunk

std::shared_ptr<const Model> bench_model() {
  static std::shared_ptr<const Model> m = [] {
    const char* env = std::getenv("CHANNEL_BENCH_MODEL");
    return Model::load(env ? env : std::string(CHANNEL_SOURCE_DIR) + "/models/channel-bounded.gguf");
  }();
  return m;
}

// The text's tokens and where a sentence starts (StreamSession::feed's marks).
struct Text {
  std::vector<int32_t> tokens;
  std::vector<uint8_t> starts;
};

const Text& bench_text(const Model& model) {
  static const Text text = [&] {
    const char* env = std::getenv("CHANNEL_BENCH_TEXT");
    std::ifstream in(env ? env : std::string(CHANNEL_SOURCE_DIR) + "/train/results/heldout.txt");
    std::stringstream ss;
    ss << in.rdbuf();
    Text t;
    t.tokens = model.tokenizer().encode(ss.str(), false, false);
    SentenceSplitter splitter;
    for (size_t i = 0; i < t.tokens.size(); ++i) {
      const bool starts = splitter.feed(model.tokenizer().token_to_piece(t.tokens[i], false));
      t.starts.push_back(i == 0 || starts);
    }
    return t;
  }();
  return text;
}

RingSessionConfig geometry(int threads) {
  RingSessionConfig c;
  c.ring.n_slots = 4096;
  c.ring.n_recall = 256;
  c.ring.probe_reserve = 1;
  c.n_threads = threads;
  c.n_batch = 64;
  return c;
}

void feed_batched(RingSession& s, const Text& text, size_t first, size_t n) {
  for (size_t i = first; i < first + n; i += kPiece) {
    const size_t m = std::min(kPiece, first + n - i);
    benchmark::DoNotOptimize(s.feed(SpanType::user, {text.tokens.data() + i, m},
                                    {text.starts.data() + i, m})
                                 .data());
  }
}

void feed_baseline(RingSession& s, const Text& text, size_t first, size_t n) {
  const RingConfig& rc = s.ring().config();
  size_t i = first;
  while (i < first + n) {
    size_t end = i + 1;  // one call per sentence (or piece of one)
    while (end < first + n && !text.starts[end]) ++end;
    bool start = text.starts[i] != 0;
    while (i < end) {
      size_t m = std::min<size_t>(end - i, 64);
      if (s.ring().sealed()) {
        const uint32_t room = s.ring().window_capacity() - s.ring().window_live();
        m = std::min<size_t>(m, std::max<uint32_t>(room, rc.probe_reserve + 1));
      }
      const std::span<const int32_t> run(text.tokens.data() + i, m);
      benchmark::DoNotOptimize((start ? s.append(SpanType::user, run) : s.decode(run)).data());
      start = false;
      i += m;
    }
  }
}

std::string store_path(const char* name) {
  return (std::filesystem::temp_directory_path() /
          ("channel_ring_ingest_bench_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

void BM_RingIngestPaired(benchmark::State& state) {
  using clock = std::chrono::steady_clock;
  const auto model = bench_model();
  const Text& text = bench_text(*model);
  const int threads = static_cast<int>(state.range(0));
  const bool memory = state.range(1) != 0;
  RingSession base(model, geometry(threads)), batched(model, geometry(threads));
  const std::string paths[2] = {store_path("baseline.mem"), store_path("batched.mem")};
  std::unique_ptr<EpisodicStore> stores[2];
  std::unique_ptr<MemoryAttachment> mems[2];
  RingSession* sessions[2] = {&base, &batched};
  const int32_t bos = std::max(model->tokenizer().bos_id(), 0);
  for (int k = 0; k < 2; ++k) {
    sessions[k]->append(SpanType::system, {&bos, 1});
    sessions[k]->seal();
    if (!memory) continue;
    std::filesystem::remove(paths[k]);
    stores[k] = std::make_unique<EpisodicStore>(open_or_create_store(paths[k], *model, 8192, 64));
    mems[k] = std::make_unique<MemoryAttachment>(*sessions[k], *stores[k]);
  }
  const size_t fill = 4096;  // the window is full from here on
  if (text.tokens.size() < fill + kBlock * (state.max_iterations + 1))
    throw_error("ring_ingest_bench: the text has {} tokens, too few", text.tokens.size());
  for (RingSession* s : sessions) feed_batched(*s, text, 0, fill);
  const auto writer_done = [&](int k) {
    if (!mems[k]) return true;
    const MemoryStats st = mems[k]->stats();
    return st.worker.written + st.worker.dropped + st.worker.failed >= st.episodes_cut;
  };
  const auto wait_writer = [&](int k) {
    while (!writer_done(k)) std::this_thread::sleep_for(std::chrono::microseconds(20));
  };
  wait_writer(0);
  wait_writer(1);
  size_t next = fill;
  double t_base = 0.0, t_batched = 0.0;
  for (auto _ : state) {
    const auto a = clock::now();
    feed_baseline(base, text, next, kBlock);
    wait_writer(0);
    const auto b = clock::now();
    feed_batched(batched, text, next, kBlock);
    wait_writer(1);
    const auto c = clock::now();
    next += kBlock;
    t_base += std::chrono::duration<double>(b - a).count();
    t_batched += std::chrono::duration<double>(c - b).count();
    state.SetIterationTime(std::chrono::duration<double>(c - b).count());
  }
  if (std::memcmp(base.logits().data(), batched.logits().data(), base.logits().size_bytes()) != 0)
    state.SkipWithError("the two schedules' last logits differ");
  const double n = static_cast<double>(state.iterations() * kBlock);
  state.counters["baseline_tok_s"] = n / t_base;
  state.counters["batched_tok_s"] = n / t_batched;
  state.counters["speedup"] = t_base / t_batched;
  for (int k = 0; k < 2; ++k) {
    mems[k].reset();
    stores[k].reset();
    std::filesystem::remove(paths[k]);
  }
}
BENCHMARK(BM_RingIngestPaired)
    ->Args({1, 0})
    ->Args({2, 0})
    ->Args({2, 1})
    ->ArgNames({"threads", "memory"})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(8)
    ->UseManualTime();

}  // namespace
}  // namespace channel
