// StreamSession and session files on micro models: fed text is cut into spans at sentence
// ends, generated text into response_sentence spans; greedy generation on the ring equals
// plain generation before the first eviction; a saved and restored session continues with
// bit-identical logits and tokens through many evictions; every corrupt, truncated or
// mismatched file is a one-line error and an existing file survives a failed save.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "fuzz/session_fuzz_model.h"
#include "runtime/generate.h"
#include "runtime/generate_stream.h"
#include "runtime/session.h"
#include "runtime/session_file.h"
#include "runtime/stream_session.h"
#include "util/error.h"
#include "support/micro_model.h"

namespace channel {
namespace {

using fuzz::session_fuzz_config;
using fuzz::session_fuzz_model;

// Differs from the fuzz model only in its weights.
std::shared_ptr<const Model> other_model() {
  static const std::shared_ptr<const Model> model = fuzz::make_session_fuzz_model(12);
  return model;
}

SamplerConfig noisy_sampler() {
  SamplerConfig c;
  c.temperature = 0.9f;
  c.repeat_penalty = 1.1f;
  c.repeat_last_n = 16;
  c.seed = 1234;
  return c;
}

// Room for every test's text without evictions.
RingSessionConfig roomy() {
  RingSessionConfig c = session_fuzz_config();
  c.ring.n_slots = 256;
  return c;
}

std::unique_ptr<StreamSession> booted(const SamplerConfig& sampling = noisy_sampler(),
                                      const RingSessionConfig& config = session_fuzz_config()) {
  auto s = std::make_unique<StreamSession>(session_fuzz_model(), config, sampling);
  const std::vector<int32_t> sys = {2, 40, 41, 42, 43};
  s->append(SpanType::system, sys);
  s->seal();
  return s;
}

std::vector<int32_t> encode(const std::string& text) {
  return session_fuzz_model()->tokenizer().encode(text, false, false);
}

// Spans of the window, as (type, text).
std::vector<std::pair<SpanType, std::string>> window_spans(const StreamSession& s,
                                                           const std::vector<int32_t>& fed) {
  std::vector<std::pair<SpanType, std::string>> out;
  const SlotRing& ring = s.ring_session().ring();
  const uint64_t base = ring.n_sys();
  for (size_t i = 0; i < ring.window_span_count(); ++i) {
    const SemanticSpan& sp = ring.window_span(i);
    std::vector<int32_t> ids(fed.begin() + (sp.start_clock - base),
                             fed.begin() + (sp.end_clock - base));
    out.emplace_back(sp.span_type, s.tokenizer().decode(ids));
  }
  return out;
}

TEST(StreamSession, FedTextIsCutAtSentenceEndsAndPiecesContinueTheirSentence) {
  auto s = booted(noisy_sampler(), roomy());
  const std::vector<int32_t> a = encode("the cat sat. it was warm! then it sl");
  const std::vector<int32_t> b = encode("ept well.\na new line");
  s->feed(SpanType::user, a);
  s->feed(SpanType::user, b);
  std::vector<int32_t> all = a;
  all.insert(all.end(), b.begin(), b.end());
  const auto spans = window_spans(*s, all);
  ASSERT_EQ(spans.size(), 4u);
  EXPECT_EQ(spans[0].second, "the cat sat.");
  EXPECT_EQ(spans[1].second, " it was warm!");
  EXPECT_EQ(spans[2].second, " then it slept well.\n");
  EXPECT_EQ(spans[3].second, "a new line");
  for (const auto& sp : spans) EXPECT_EQ(sp.first, SpanType::user);
  // Another type, or an explicit append, always begins a new span.
  s->feed(SpanType::tool_result, encode(" ok"));
  EXPECT_EQ(s->ring_session().ring().window_span_count(), 5u);
  EXPECT_EQ(s->ring_session().ring().window_span(4).span_type, SpanType::tool_result);
}

TEST(StreamSession, GeneratedTextGoesIntoResponseSentenceSpans) {
  auto s = booted(noisy_sampler(), roomy());
  s->feed(SpanType::user, encode("hello there."));
  const size_t before = s->ring_session().ring().window_span_count();
  std::string text;
  int new_spans = 0;
  for (int i = 0; i < 30; ++i) {
    const GeneratedToken g = s->next(EogPolicy::turn_end);
    text += g.text;
    new_spans += g.new_span;
  }
  const SlotRing& ring = s->ring_session().ring();
  ASSERT_GT(ring.window_span_count(), before);
  EXPECT_EQ(ring.window_span(before).span_type, SpanType::response_sentence);
  EXPECT_EQ(ring.window_span_count() - before, static_cast<size_t>(new_spans));
  EXPECT_EQ(ring.clock(), 5 + encode("hello there.").size() + 30);
  // Every fed token is in the sampler's history.
  EXPECT_EQ(s->sampler().recent_tokens().size(), 16u);
}

// generate_stream is next() in a loop: the same tokens, text and spans as calling it by hand,
// the budget, a stopping callback (the token it refused is fed) and before_token.
TEST(StreamSession, GenerateStreamIsNextInALoop) {
  auto a = booted(noisy_sampler(), roomy());
  auto b = booted(noisy_sampler(), roomy());
  a->feed(SpanType::user, encode("hello there."));
  b->feed(SpanType::user, encode("hello there."));
  std::vector<GeneratedToken> by_hand;
  for (int i = 0; i < 25; ++i) by_hand.push_back(a->next(EogPolicy::turn_end));
  std::vector<GeneratedToken> looped;
  StreamGenerateCallbacks on;
  on.on_token = [&](const GeneratedToken& g) {
    looped.push_back(g);
    return true;
  };
  const StreamGenerateResult r = generate_stream(*b, 25, EogPolicy::turn_end, on);
  EXPECT_EQ(r.n_generated, 25);
  EXPECT_EQ(r.stop, StopReason::max_tokens);
  ASSERT_EQ(looped.size(), by_hand.size());
  for (size_t i = 0; i < looped.size(); ++i) {
    EXPECT_EQ(looped[i].token, by_hand[i].token) << i;
    EXPECT_EQ(looped[i].text, by_hand[i].text) << i;
    EXPECT_EQ(looped[i].new_span, by_hand[i].new_span) << i;
  }
  EXPECT_EQ(a->clock(), b->clock());
  EXPECT_EQ(a->span_state(), b->span_state());

  int calls = 0;
  on.on_token = [&](const GeneratedToken&) { return ++calls < 3; };
  const StreamGenerateResult stopped = generate_stream(*b, -1, EogPolicy::turn_end, on);
  EXPECT_EQ(stopped.stop, StopReason::cancelled);
  EXPECT_EQ(stopped.n_generated, 3);
  EXPECT_EQ(b->clock(), a->clock() + 3);
  on.before_token = [] { return false; };
  const StreamGenerateResult none = generate_stream(*b, 10, EogPolicy::turn_end, on);
  EXPECT_EQ(none.stop, StopReason::cancelled);
  EXPECT_EQ(none.n_generated, 0);
  EXPECT_EQ(b->clock(), a->clock() + 3);
}

TEST(StreamSession, NextFeedsEveryTokenSoGreedyEqualsPlainGeneration) {
  // Before anything is evicted the ring computes what a contiguous session computes, so
  // greedy tokens agree with generate_tokens (which leaves the last token undecoded).
  SamplerConfig greedy;
  greedy.temperature = 0;
  auto ring = std::make_unique<StreamSession>(session_fuzz_model(), session_fuzz_config(), greedy);
  const std::vector<int32_t> prompt = {2, 50, 60, 70, 80, 90};
  ring->append(SpanType::system, prompt);
  ring->seal();
  std::vector<int32_t> ring_tokens;
  for (int i = 0; i < 20; ++i) ring_tokens.push_back(ring->next(EogPolicy::turn_end).token);

  Session plain(session_fuzz_model(), SessionConfig{.n_ctx = 64, .n_threads = 1});
  Sampler sampler(greedy);
  std::vector<int32_t> plain_tokens;
  GenerateCallbacks cb;
  cb.on_token = [&](int32_t t) {
    plain_tokens.push_back(t);
    return true;
  };
  generate_tokens(plain, sampler, prompt, 20, cb);
  EXPECT_EQ(ring_tokens, plain_tokens);
}

TEST(SessionFile, RestoredSessionContinuesBitIdentically) {
  for (const int split_at : {3, 57, 300, 333}) {
    auto a = booted();
    a->feed(SpanType::user, encode("tell me a story. make it long"));
    for (int i = 0; i < split_at; ++i) a->next(EogPolicy::turn_end);
    const std::vector<uint8_t> bytes = session_to_bytes(*a);
    auto b = session_from_bytes(bytes, "test", session_fuzz_model(), session_fuzz_config());
    ASSERT_EQ(state_diff(a->ring_session().ring(), b->ring_session().ring()), "");
    ASSERT_EQ(a->span_state(), b->span_state());
    ASSERT_EQ(std::memcmp(a->logits().data(), b->logits().data(), a->logits().size_bytes()), 0);
    EXPECT_EQ(session_to_bytes(*b), bytes);
    for (int i = 0; i < 150; ++i) {
      const GeneratedToken ga = a->next(EogPolicy::turn_end);
      const GeneratedToken gb = b->next(EogPolicy::turn_end);
      ASSERT_EQ(ga.token, gb.token) << "split " << split_at << " step " << i;
      ASSERT_EQ(ga.new_span, gb.new_span);
      ASSERT_EQ(std::memcmp(a->logits().data(), b->logits().data(), a->logits().size_bytes()), 0)
          << "split " << split_at << " step " << i;
      if (i == 70) {  // a user message in the middle takes the same path
        const std::vector<int32_t> msg = encode("stop. go on.");
        a->feed(SpanType::user, msg);
        b->feed(SpanType::user, msg);
      }
    }
    EXPECT_GT(a->ring_session().ring().evicted_spans(), 10u);
    EXPECT_EQ(a->ring_session().max_distance(), b->ring_session().max_distance());
  }
}

TEST(SessionFile, BoundedLayersRingsAreSavedAndResumeBitIdentically) {
  static const std::vector<uint8_t> bytes =
      test::model_bytes(test::micro_model_spec(Arch::bounded, 5));
  const auto model = Model::load_from_memory(bytes, "bounded.gguf");
  StreamSession a(model, session_fuzz_config(), noisy_sampler());
  const std::vector<int32_t> sys = {2, 40, 41};
  a.append(SpanType::system, sys);
  a.seal();
  for (int i = 0; i < 77; ++i) a.next(EogPolicy::turn_end);
  const auto saved = session_to_bytes(a);
  auto b = session_from_bytes(saved, "b", model, session_fuzz_config());
  EXPECT_TRUE(a.ring_session().bounded_state(0).same_ring(b->ring_session().bounded_state(0)));
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(a.next(EogPolicy::turn_end).token, b->next(EogPolicy::turn_end).token) << i;
    ASSERT_EQ(std::memcmp(a.logits().data(), b->logits().data(), a.logits().size_bytes()), 0) << i;
  }
  EXPECT_GT(a.ring_session().ring().evicted_spans(), 0u);
  EXPECT_THROW(session_from_bytes(saved, "b", session_fuzz_model(), session_fuzz_config()), Error);
}

TEST(SessionFile, ATentativeDecodeAllIsNotSavedUntilSettled) {
  auto s = booted();
  s->feed(SpanType::user, encode("hi."));
  const std::vector<int32_t> draft = {70, 71};  // probe reserve 2: tentative
  s->ring_session().decode_all(draft);
  EXPECT_THROW(session_to_bytes(*s), Error);
  s->ring_session().truncate_last(1);
  const auto bytes = session_to_bytes(*s);
  EXPECT_EQ(session_from_bytes(bytes, "t", session_fuzz_model(), session_fuzz_config())->clock(),
            s->clock());
}

TEST(SessionFile, UnsealedAndEmptySessionsRoundTrip) {
  for (int n_anchor : {0, 3}) {
    StreamSession a(session_fuzz_model(), session_fuzz_config(), noisy_sampler());
    std::vector<int32_t> sys(n_anchor, 9);
    if (n_anchor) a.append(SpanType::system, sys);
    const auto bytes = session_to_bytes(a);
    auto b = session_from_bytes(bytes, "test", session_fuzz_model(), session_fuzz_config());
    EXPECT_EQ(b->clock(), static_cast<uint64_t>(n_anchor));
    EXPECT_FALSE(b->ring_session().ring().sealed());
    b->seal();
  }
}

void expect_error(const std::vector<uint8_t>& bytes, const std::string& needle,
                  const RingSessionConfig& config = session_fuzz_config(),
                  std::shared_ptr<const Model> model = session_fuzz_model()) {
  try {
    session_from_bytes(bytes, "f.session", std::move(model), config);
    ADD_FAILURE() << "no error, expected '" << needle << "'";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    EXPECT_EQ(msg.rfind("f.session: ", 0), 0u) << msg;
  }
}

TEST(SessionFile, CorruptTruncatedAndMismatchedFilesAreClearErrors) {
  auto a = booted();
  a->feed(SpanType::user, encode("some text. more text."));
  for (int i = 0; i < 80; ++i) a->next(EogPolicy::turn_end);
  const std::vector<uint8_t> good = session_to_bytes(*a);

  expect_error({}, "bad magic");
  for (size_t cut : {size_t{7}, size_t{40}, size_t{64}, good.size() / 2, good.size() - 1}) {
    expect_error(std::vector<uint8_t>(good.begin(), good.begin() + cut), "");
  }
  std::vector<uint8_t> longer = good;
  longer.push_back(0);
  expect_error(longer, "truncated or extended");
  // Any flipped byte after the magic fails (checksum, or the header field it hit).
  for (size_t at = 8; at < good.size(); at += 37) {
    std::vector<uint8_t> bad = good;
    bad[at] ^= 0x40;
    expect_error(bad, "");
  }
  std::vector<uint8_t> bad = good;
  bad[good.size() / 2] ^= 1;
  expect_error(bad, "checksum mismatch");

  expect_error(good, "another model", session_fuzz_config(), other_model());
  RingSessionConfig geometry = session_fuzz_config();
  geometry.ring.n_recall = 5;
  expect_error(good, "another geometry", geometry);
  // Threads and batch size are not part of the file.
  RingSessionConfig threads = session_fuzz_config();
  threads.n_threads = 2;
  threads.n_batch = 3;
  auto b = session_from_bytes(good, "f", session_fuzz_model(), threads);
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(a->next(EogPolicy::turn_end).token, b->next(EogPolicy::turn_end).token);
  }
}

TEST(SessionFile, SaveIsAtomicAndAFailedSaveKeepsThePreviousFile) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("channel_session_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "s.session").string();
  auto a = booted();
  a->feed(SpanType::user, encode("first."));
  auto names = [&] {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir))
      out.push_back(e.path().filename());
    return out;
  };
  save_session_file(path, *a);
  EXPECT_EQ(names(), std::vector<std::string>{"s.session"});  // no temporary file left
  std::ifstream in(path, std::ios::binary);
  const std::vector<uint8_t> first((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(first, session_to_bytes(*a));

  a->feed(SpanType::user, encode("second."));
  // A file size limit makes the write of the temporary file fail, root or not.
  struct rlimit old_limit;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old_limit;
  small.rlim_cur = 64;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  EXPECT_THROW(save_session_file(path, *a), Error);
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(names(), std::vector<std::string>{"s.session"});
  std::ifstream again(path, std::ios::binary);
  EXPECT_EQ(std::vector<uint8_t>((std::istreambuf_iterator<char>(again)), {}), first);

  save_session_file(path, *a);
  auto b = load_session_file(path, session_fuzz_model(), session_fuzz_config());
  EXPECT_EQ(b->clock(), a->clock());
  EXPECT_THROW(
      load_session_file((dir / "missing").string(), session_fuzz_model(), session_fuzz_config()),
      Error);
  std::filesystem::remove_all(dir);
}

// Not a test: with CHANNEL_WRITE_FUZZ_SEEDS=tests/fuzz/corpus/session_file_fuzz and
// --gtest_also_run_disabled_tests it rewrites the fuzz seeds.
TEST(SessionFile, DISABLED_WriteFuzzSeeds) {
  const char* dir = std::getenv("CHANNEL_WRITE_FUZZ_SEEDS");
  if (dir == nullptr) GTEST_SKIP() << "set CHANNEL_WRITE_FUZZ_SEEDS=DIR to write the seeds";
  auto write = [&](const char* name, const StreamSession& s) {
    const auto bytes = session_to_bytes(s);
    std::ofstream(std::filesystem::path(dir) / name, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
  };
  StreamSession fresh(session_fuzz_model(), session_fuzz_config(), noisy_sampler());
  write("empty", fresh);
  auto s = booted();
  write("sealed", *s);
  s->feed(SpanType::user, encode("hi. who are you?"));
  for (int i = 0; i < 10; ++i) s->next(EogPolicy::turn_end);
  write("short", *s);
  for (int i = 0; i < 100; ++i) s->next(EogPolicy::turn_end);
  write("wrapped", *s);
}

}  // namespace
}  // namespace channel
