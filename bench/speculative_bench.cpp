// Speculative greedy decoding with the trained models on a repetitive workload (Python code
// that repeats itself with small changes): models/channel-default.gguf as the target, drafts
// from prompt lookup (n-gram) or from models/channel-bounded.gguf (same vocabulary), for
// draft-max 4, 8 and 16, on a plain Session, on a RingSession (1024 slots, probe reserve 17),
// and on that ring's StreamSession (generate_stream against generate_stream_speculative: the
// stream cuts the generated text into sentence spans, as `channel run --draft` on the ring).
// Reported per variant: generated tok/s, `speedup` = plain greedy generation time / this
// variant's, measured back to back in each iteration (median over iterations), for the same
// prompt and token count (the outputs are checked equal), `acceptance` = accepted / drafted, and
// `per_verify` = tokens advanced per target forward. Only generation is timed (the prompt's prefill
// is the same for all).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "model/model.h"
#include "runtime/generate_stream.h"
#include "runtime/ring_session.h"
#include "runtime/session.h"
#include "runtime/speculative.h"
#include "runtime/stream_session.h"
#include "runtime/stream_speculative.h"
#include "tokenizer/tokenizer.h"

namespace channel {
namespace {

constexpr int kThreads = 2;
constexpr int kGenerate = 160;

std::shared_ptr<const Model> load(const char* file) {
  const std::string path = std::string(CHANNEL_SOURCE_DIR) + "/models/" + file;
  if (!std::filesystem::exists(path)) return nullptr;
  return Model::load(path);
}

std::shared_ptr<const Model> target() {
  static std::shared_ptr<const Model> m = load("channel-default.gguf");
  return m;
}

std::shared_ptr<const Model> drafter_model() {
  static std::shared_ptr<const Model> m = load("channel-bounded.gguf");
  return m;
}

const std::vector<int32_t>& prompt() {
  static const std::vector<int32_t> p = [] {
    std::string text;
    for (const char* name : {"alpha", "beta", "gamma"}) {
      text += std::string("def ") + name + "(items):\n    total = 0\n    for item in items:\n" +
              "        if item > 0:\n            total += item\n    return total\n\n";
    }
    text += "def delta(items):\n";
    const Tokenizer& tok = target()->tokenizer();
    return tok.encode(text, tok.add_bos_default(), /*parse_special=*/false);
  }();
  return p;
}

struct Result {
  std::vector<int32_t> out;
  SpeculativeStats stats;
};

enum class Kind { none, ngram, model };
enum class On { session, ring, stream };

RingSessionConfig ring_config() {
  RingSessionConfig rc;
  rc.ring = RingConfig{1024, 64, 17, 0};  // the sliding window is 512
  rc.n_threads = kThreads;
  return rc;
}

// The stream's generation, timed as SpeculativeStats::generate_seconds for plain greedy too.
void generate_on_stream(Drafter* drafter, int draft_max, Result& r) {
  SamplerConfig greedy;
  greedy.temperature = 0.0f;
  StreamSession s(target(), ring_config(), greedy);
  const int32_t bos = prompt()[0];
  s.append(SpanType::system, {&bos, 1});
  s.seal();
  s.feed(SpanType::user, std::span<const int32_t>(prompt()).subspan(1));
  StreamGenerateCallbacks on;
  on.on_token = [&r](const GeneratedToken& g) {
    r.out.push_back(g.token);
    return true;
  };
  const auto t0 = std::chrono::steady_clock::now();
  if (drafter) {
    generate_stream_speculative(s, kGenerate, drafter, draft_max, prompt(), on, &r.stats);
  } else {
    generate_stream(s, kGenerate, EogPolicy::stop, on);
    r.stats.generated = static_cast<int>(r.out.size());
    r.stats.generate_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
}

Result generate(Kind kind, int draft_max, On on) {
  const std::shared_ptr<const Model> m = target();
  std::unique_ptr<Drafter> drafter;
  const SessionConfig config{1024, kThreads, 256};
  if (kind == Kind::ngram) drafter = std::make_unique<NgramDrafter>(3, 1);
  if (kind == Kind::model) drafter = std::make_unique<ModelDrafter>(drafter_model(), *m, config);
  Result r;
  if (on == On::stream) {
    generate_on_stream(drafter.get(), draft_max, r);
  } else if (on == On::session) {
    Session s(m, config);
    r.out =
        generate_greedy_speculative(s, prompt(), kGenerate, drafter.get(), draft_max, {}, &r.stats);
  } else {
    RingSession s(m, ring_config());
    const int32_t bos = prompt()[0];
    s.append(SpanType::system, {&bos, 1});
    s.seal();
    s.begin_span(SpanType::user);
    r.out = generate_greedy_speculative(s, std::span<const int32_t>(prompt()).subspan(1), kGenerate,
                                        drafter.get(), draft_max, {}, &r.stats);
  }
  return r;
}

// Plain greedy on each session kind, once per process: the reference output.
const Result& baseline(On on) {
  static const Result session = generate(Kind::none, 0, On::session);
  static const Result ring = generate(Kind::none, 0, On::ring);
  static const Result stream = generate(Kind::none, 0, On::stream);
  return on == On::session ? session : on == On::ring ? ring : stream;
}

// Each iteration runs plain greedy and then the variant back to back, so that the speed-up
// of the pair is measured under the same load (the machine may be shared); the median over
// the iterations is reported.
void run(benchmark::State& state, Kind kind, On on) {
  if (!target() || (kind == Kind::model && !drafter_model())) {
    state.SkipWithError("models/channel-default.gguf or channel-bounded.gguf missing");
    return;
  }
  const int draft_max = kind == Kind::none ? 0 : static_cast<int>(state.range(0));
  const Result& base = baseline(on);
  double seconds = 0, accepted = 0, drafted = 0, steps = 0, generated = 0;
  std::vector<double> speedups;
  for (auto _ : state) {
    const Result plain = generate(Kind::none, 0, on);
    const Result r = generate(kind, draft_max, on);
    if (r.out != base.out || plain.out != base.out) {
      state.SkipWithError("output differs from plain greedy decoding");
      return;
    }
    state.SetIterationTime(r.stats.generate_seconds);
    speedups.push_back(plain.stats.generate_seconds / r.stats.generate_seconds);
    seconds += r.stats.generate_seconds;
    accepted += r.stats.accepted;
    drafted += r.stats.drafted;
    steps += r.stats.verify_steps;
    generated += r.stats.generated;
  }
  std::sort(speedups.begin(), speedups.end());
  state.counters["tok_per_s"] = generated / seconds;
  state.counters["speedup"] = speedups[speedups.size() / 2];
  state.counters["acceptance"] = drafted > 0 ? accepted / drafted : 0;
  state.counters["per_verify"] = steps > 0 ? (accepted + steps) / steps : 0;
  state.counters["prompt_tokens"] = static_cast<double>(prompt().size());
}

void BM_Greedy(benchmark::State& state) {
  run(state, Kind::none, On::session);
}
void BM_Ngram(benchmark::State& state) {
  run(state, Kind::ngram, On::session);
}
void BM_DraftModel(benchmark::State& state) {
  run(state, Kind::model, On::session);
}
void BM_RingGreedy(benchmark::State& state) {
  run(state, Kind::none, On::ring);
}
void BM_RingNgram(benchmark::State& state) {
  run(state, Kind::ngram, On::ring);
}
void BM_StreamGreedy(benchmark::State& state) {
  run(state, Kind::none, On::stream);
}
void BM_StreamNgram(benchmark::State& state) {
  run(state, Kind::ngram, On::stream);
}

BENCHMARK(BM_Greedy)->UseManualTime()->Iterations(2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Ngram)->Arg(4)->Arg(8)->Arg(16)->UseManualTime()->Iterations(3)->Unit(
    benchmark::kMillisecond);
BENCHMARK(BM_DraftModel)
    ->Arg(4)
    ->Arg(8)
    ->Arg(16)
    ->UseManualTime()
    ->Iterations(2)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RingGreedy)->UseManualTime()->Iterations(2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_RingNgram)
    ->Arg(4)
    ->Arg(8)
    ->Arg(16)
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_StreamGreedy)->UseManualTime()->Iterations(2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_StreamNgram)
    ->Arg(4)
    ->Arg(8)
    ->Arg(16)
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace channel
