// Logits of every model and sequence in testdata/goldens against llama.cpp's, with the
// tolerances of testdata/README.md sections 2 and 5; and stories260K's greedy generations.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/model.h"
#include "runtime/session.h"
#include "testdata.h"
#include "tokenizer/tokenizer.h"

namespace channel {
namespace {

using nlohmann::json;

json read_json(const std::string& rel) {
  std::ifstream in(test::testdata_path(rel));
  return json::parse(in);
}

std::vector<float> read_f32(const std::string& rel) {
  std::ifstream in(test::testdata_path(rel), std::ios::binary | std::ios::ate);
  const auto size = static_cast<size_t>(in.tellg());
  std::vector<float> v(size / sizeof(float));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(size));
  return v;
}

std::vector<int> top_k(std::span<const float> x, int k) {
  std::vector<int> idx(x.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int a, int b) {
    return x[static_cast<size_t>(a)] > x[static_cast<size_t>(b)] ||
           (x[static_cast<size_t>(a)] == x[static_cast<size_t>(b)] && a < b);
  });
  idx.resize(static_cast<size_t>(k));
  return idx;
}

struct Tolerance {
  double max_abs;
  bool quantized;
};

Tolerance tolerance_for(const std::string& name) {
  const bool is_float = name.ends_with("-f32") || name.ends_with("-f16");
  if (!is_float) return {0.1, true};  // every quantized type (README sections 2 and 5)
  if (name == "llama-micro-f32") return {1e-4, false};
  // llama.cpp's own qwen3 f32 logits sit 2.5e-4 from a float64 forward of the same file (a
  // pure-Python check of seq1: one token, so no attention or rope arithmetic); Channel's are
  // within 1e-6 of that forward. README section 5's 1e-4 does not hold for llama.cpp itself.
  if (name == "qwen3-micro-f32") return {1e-3, false};
  if (name == "gemma3-micro-f32") return {2e-3, false};
  return {3e-3, false};  // gemma3-micro-f16
}

struct Diff {
  double max_abs = 0, rms = 0, cosine = 0;
};

Diff compare(std::span<const float> got, std::span<const float> want) {
  double max_abs = 0, sq = 0, dot = 0, ng = 0, nw = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    max_abs = std::max(max_abs, std::abs(d));
    sq += d * d;
    dot += static_cast<double>(got[i]) * want[i];
    ng += static_cast<double>(got[i]) * got[i];
    nw += static_cast<double>(want[i]) * want[i];
  }
  return {max_abs, std::sqrt(sq / static_cast<double>(got.size())), dot / std::sqrt(ng * nw)};
}

class Goldens : public ::testing::TestWithParam<std::string> {};

TEST_P(Goldens, LastPositionLogitsMatchLlamaCpp) {
  CHANNEL_REQUIRE_TESTDATA();
  const std::string name = GetParam();
  const Tolerance tol = tolerance_for(name);
  auto model = Model::load(test::testdata_path("models/" + name + ".gguf"));
  Session session(model, SessionConfig{.n_ctx = 320, .n_threads = 2});
  const json seqs = read_json("goldens/sequences.json")["sequences"];
  double worst = 0;
  for (const char* seq : {"seq1", "seq7", "seq100", "seq300"}) {
    SCOPED_TRACE(name + "/" + seq);
    const std::vector<int32_t> ids = seqs[seq].get<std::vector<int32_t>>();
    const std::string dir = "goldens/" + name + "/" + seq;
    const std::vector<float> want = read_f32(dir + ".logits.f32");
    const json top10 = read_json(dir + ".top10.json")["top10"];

    session.reset();
    const std::span<const float> got = session.decode(ids);
    ASSERT_EQ(got.size(), want.size());
    const Diff d = compare(got, want);
    worst = std::max(worst, d.max_abs);
    std::printf("[ goldens ] %-18s %-6s max|diff| %.3g  rms %.3g  cosine %.7f\n", name.c_str(), seq,
                d.max_abs, d.rms, d.cosine);
    EXPECT_LE(d.max_abs, tol.max_abs);

    const std::vector<int> mine = top_k(got, 10);
    const double margin = top10[0]["logit"].get<double>() - top10[1]["logit"].get<double>();
    if (!tol.quantized || margin > tol.max_abs) {
      EXPECT_EQ(mine[0], top10[0]["id"].get<int>());
    }
    if (tol.quantized) {
      EXPECT_LE(d.rms, 0.025);
      EXPECT_GE(d.cosine, 0.998);
      int overlap = 0;
      for (const auto& e : top10)
        overlap += std::count(mine.begin(), mine.end(), e["id"].get<int>()) > 0 ? 1 : 0;
      EXPECT_GE(overlap, 8);
    }
  }
  std::printf("[ goldens ] %-18s worst max|diff| %.3g (tolerance %.3g)\n", name.c_str(), worst,
              tol.max_abs);
}

// The same sequence fed in pieces (a prompt chunk, then one token at a time) gives the same
// last logits as one batch: the KV cache and the sliding window are right across calls.
TEST_P(Goldens, IncrementalDecodeMatchesOneBatch) {
  CHANNEL_REQUIRE_TESTDATA();
  const std::string name = GetParam();
  auto model = Model::load(test::testdata_path("models/" + name + ".gguf"));
  const std::vector<int32_t> ids =
      read_json("goldens/sequences.json")["sequences"]["seq100"].get<std::vector<int32_t>>();
  // One thread: this test issues many tiny decodes, and the CI machine may be oversubscribed.
  Session whole(model, SessionConfig{.n_ctx = 128, .n_threads = 1});
  const std::span<const float> batch_logits = whole.decode(ids);
  const std::vector<float> expected(batch_logits.begin(), batch_logits.end());

  Session pieces(model, SessionConfig{.n_ctx = 128, .n_threads = 1, .n_batch = 16});
  const std::span<const int32_t> all(ids);
  pieces.decode(all.first(60));
  std::span<const float> got;
  for (size_t i = 60; i < ids.size(); ++i) got = pieces.decode(all.subspan(i, 1));
  EXPECT_EQ(pieces.n_past(), static_cast<int>(ids.size()));
  const Diff d = compare(got, expected);
  // Batched and single-token matmuls may sum in different orders, and Gemma's f16 GELU
  // table turns tiny differences into f16 rounding steps: allow the golden tolerance.
  EXPECT_LE(d.max_abs, tolerance_for(name).quantized ? 2e-2 : tolerance_for(name).max_abs) << name;
}

// decode_all returns every position's logits; its last row is decode()'s result.
TEST_P(Goldens, DecodeAllLastRowMatchesDecode) {
  CHANNEL_REQUIRE_TESTDATA();
  const std::string name = GetParam();
  auto model = Model::load(test::testdata_path("models/" + name + ".gguf"));
  const std::vector<int32_t> ids =
      read_json("goldens/sequences.json")["sequences"]["seq7"].get<std::vector<int32_t>>();
  Session session(model, SessionConfig{.n_ctx = 16, .n_threads = 1});
  const std::span<const float> all = session.decode_all(ids);
  const size_t n_vocab = static_cast<size_t>(model->hparams().n_vocab);
  ASSERT_EQ(all.size(), ids.size() * n_vocab);
  const std::vector<float> want = read_f32("goldens/" + name + "/seq7.logits.f32");
  const Diff d = compare(std::span<const float>(all).last(n_vocab), want);
  EXPECT_LE(d.max_abs, tolerance_for(name).max_abs);
  // Row 0 is the logits after BOS alone, i.e. seq1's golden.
  const std::vector<float> want1 = read_f32("goldens/" + name + "/seq1.logits.f32");
  EXPECT_LE(compare(std::span<const float>(all).first(n_vocab), want1).max_abs,
            tolerance_for(name).max_abs);
}

INSTANTIATE_TEST_SUITE_P(
    Micro, Goldens,
    ::testing::Values("llama-micro-f32", "llama-micro-q8_0", "llama-micro-q4_0", "gemma3-micro-f32",
                      "gemma3-micro-f16", "gemma3-micro-q8_0", "gemma3-micro-q4_0",
                      // legacy fallbacks and a Q4_K_M of hidden 128
                      "gemma3-micro-q4_1", "gemma3-micro-q5_0", "gemma3-micro-q5_1",
                      "gemma3-micro-q4_k_m",
                      // every K-quant on rows of 256
                      "gemma3-k-q2_k", "gemma3-k-q3_k_m", "gemma3-k-q4_k_m", "gemma3-k-q5_k_m",
                      "gemma3-k-q6_k", "llama-k-q2_k", "llama-k-q3_k_m", "llama-k-q4_k_m",
                      "llama-k-q5_k_m", "llama-k-q6_k",
                      // Qwen 3
                      "qwen3-micro-f32", "qwen3-micro-q8_0", "qwen3-k-q4_k_m"),
    [](const auto& info) {
      std::string s = info.param;
      std::replace(s.begin(), s.end(), '-', '_');
      return s;
    });

// stories260K: 200 greedy tokens after each prompt reproduce llama2.c's and llama.cpp's ids.
TEST(Stories260K, GreedyGenerationsMatchReference) {
  CHANNEL_REQUIRE_TESTDATA();
  auto model = Model::load(test::testdata_path("stories260K/stories260K.gguf"));
  Session session(model, SessionConfig{.n_ctx = 512, .n_threads = 2});
  const json greedy = read_json("stories260K/greedy.json");
  for (const json& c : greedy["cases"]) {
    const std::string prompt = c["prompt"].get<std::string>();
    SCOPED_TRACE("prompt '" + prompt + "'");
    const std::vector<int32_t> prompt_ids = c["llama2c"]["prompt_ids"].get<std::vector<int32_t>>();
    const std::vector<int32_t> want = c["llama2c"]["gen_ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(model->tokenizer().encode(prompt, true, true), prompt_ids);
    session.reset();
    std::span<const float> logits = session.decode(prompt_ids);
    std::vector<int32_t> got;
    for (size_t i = 0; i < want.size(); ++i) {
      const auto best = std::max_element(logits.begin(), logits.end()) - logits.begin();
      got.push_back(static_cast<int32_t>(best));
      if (i + 1 < want.size()) logits = session.decode(std::span<const int32_t>(&got.back(), 1));
    }
    EXPECT_EQ(got, want);
  }
}

}  // namespace
}  // namespace channel
