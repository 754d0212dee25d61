// `channel quantize`'s per-tensor rules against llama-quantize's own files (every K-quant
// fixture of testdata: each tensor's type must be the one llama.cpp chose), and the whole
// conversion of gemma3-micro-f32 to Q4_K_M against llama.cpp's file of it.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/thread_pool.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "model/model.h"
#include "model/quant_mix.h"
#include "model/quantize_model.h"
#include "model/random_model.h"
#include "runtime/session.h"
#include "testdata.h"
#include "util/error.h"

namespace channel {
namespace {

bool is_weight(const TensorInfo& t) {
  return t.n_dims == 2 && t.name.size() >= 6 && t.name.compare(t.name.size() - 6, 6, "weight") == 0;
}

TEST(QuantMix, ParsesTypeNames) {
  EXPECT_EQ(parse_quant_mix("Q4_K_M")->base, GgmlType::Q4_K);
  EXPECT_EQ(parse_quant_mix("q4_k")->llama_ftype, 15u);
  EXPECT_EQ(parse_quant_mix("q3_k_l")->kind, QuantMixKind::k_l);
  EXPECT_EQ(parse_quant_mix("q6_k")->llama_ftype, 18u);
  EXPECT_FALSE(parse_quant_mix("q4_k_x").has_value());
  for (const std::string& n : quant_mix_names()) EXPECT_TRUE(parse_quant_mix(n).has_value()) << n;
}

TEST(QuantMix, ReproducesLlamaQuantizeTypesOfEveryFixture) {
  CHANNEL_REQUIRE_TESTDATA();
  const std::pair<const char*, const char*> files[] = {
      {"gemma3-k-q2_k", "q2_k"},     {"gemma3-k-q3_k_m", "q3_k_m"},
      {"gemma3-k-q4_k_m", "q4_k_m"}, {"gemma3-k-q5_k_m", "q5_k_m"},
      {"gemma3-k-q6_k", "q6_k"},     {"llama-k-q2_k", "q2_k"},
      {"llama-k-q3_k_m", "q3_k_m"},  {"llama-k-q4_k_m", "q4_k_m"},
      {"llama-k-q5_k_m", "q5_k_m"},  {"llama-k-q6_k", "q6_k"},
      {"qwen3-k-q4_k_m", "q4_k_m"},  {"gemma3-micro-q4_k_m", "q4_k_m"},
      {"gemma3-micro-q4_1", "q4_1"}, {"gemma3-micro-q5_0", "q5_0"},
      {"gemma3-micro-q5_1", "q5_1"}};
  for (const auto& [file, type] : files) {
    const GgufFile f = GgufFile::open(test::testdata_path(std::string("models/") + file + ".gguf"));
    QuantMixPlanner planner(*parse_quant_mix(type), quant_mix_model(f));
    int n = 0;
    for (const TensorInfo& t : f.tensors()) {
      if (!is_weight(t)) continue;
      EXPECT_EQ(ggml_type_name(static_cast<uint32_t>(planner.next(t.name, t.ne[0]))),
                ggml_type_name(t.type_id))
          << file << " " << t.name;
      ++n;
    }
    EXPECT_GT(n, 10) << file;
    EXPECT_EQ(f.get_uint("general.file_type"), parse_quant_mix(type)->llama_ftype) << file;
  }
}

// gemma3-micro-f32 -> Q4_K_M: the same tensor types as llama-quantize's file, the q8_0 and
// q5_0 tensors (llama.cpp's reference roundings) byte for byte, and logits within the
// goldens' tolerance of llama.cpp's on its own file.
TEST(QuantizeModel, Gemma3MicroQ4KMMatchesLlamaQuantize) {
  CHANNEL_REQUIRE_TESTDATA();
  const GgufFile in = GgufFile::open(test::testdata_path("models/gemma3-micro-f32.gguf"));
  const GgufFile theirs = GgufFile::open(test::testdata_path("models/gemma3-micro-q4_k_m.gguf"));
  ThreadPool pool(2);
  GgufWriter w(in.alignment());
  const QuantizeReport r = quantize_model(in, *parse_quant_mix("q4_k_m"), w, pool);
  EXPECT_EQ(r.n_quantized, 43);
  const std::vector<uint8_t> bytes = w.to_bytes();
  const GgufFile mine = GgufFile::from_memory(bytes.data(), bytes.size(), "mine.gguf");
  ASSERT_EQ(mine.tensors().size(), theirs.tensors().size());
  int identical = 0;
  for (const TensorInfo& t : theirs.tensors()) {
    const TensorInfo* m = mine.find_tensor(t.name);
    ASSERT_NE(m, nullptr) << t.name;
    EXPECT_EQ(m->type_id, t.type_id) << t.name;
    ASSERT_EQ(m->n_bytes, t.n_bytes) << t.name;
    const auto type = static_cast<GgmlType>(t.type_id);
    if (type == GgmlType::Q8_0 || type == GgmlType::Q5_0 || type == GgmlType::F32) {
      EXPECT_EQ(std::memcmp(m->data, t.data, t.n_bytes), 0) << t.name;
      ++identical;
    }
  }
  EXPECT_EQ(identical, 37 + 3 + 34);
  EXPECT_EQ(mine.get_uint("general.file_type"), 15u);
  EXPECT_EQ(mine.get_string("general.architecture"), "gemma3");

  // Its logits against llama.cpp's on llama-quantize's file (different Q4_K/Q6_K rounding).
  const auto model = Model::load_from_memory(bytes, "mine.gguf");
  Session session(model, SessionConfig{.n_ctx = 16, .n_threads = 1});
  const std::vector<int32_t> ids = {2, 100, 200, 300, 400, 500, 600};
  const auto got = session.decode(ids);
  const auto theirs_model = Model::load(test::testdata_path("models/gemma3-micro-q4_k_m.gguf"));
  Session s2(theirs_model, SessionConfig{.n_ctx = 16, .n_threads = 1});
  const auto want = s2.decode(ids);
  double dot = 0, ng = 0, nw = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    dot += static_cast<double>(got[i]) * want[i];
    ng += static_cast<double>(got[i]) * got[i];
    nw += static_cast<double>(want[i]) * want[i];
  }
  EXPECT_GE(dot / std::sqrt(ng * nw), 0.99);
}

// Every mix channel quantize writes (the _S, _M and _L variants included) loads and decodes:
// on a random gemma3 model whose rows are all multiples of 256 (the K types themselves), and
// on one of hidden 128 (their fallbacks).
TEST(QuantizeModel, EveryMixLoadsAndDecodes) {
  for (int hidden : {256, 128}) {
    RandomModelSpec spec;
    spec.arch = Arch::gemma3;
    spec.hidden = hidden;
    spec.layers = 3;
    spec.heads = 2;
    spec.kv_heads = 1;
    spec.head_dim = 64;
    spec.ffn = 512;
    spec.vocab = 300;
    ThreadPool pool(1);
    GgufWriter src;
    write_random_model(spec, src, pool);
    const std::vector<uint8_t> f32 = src.to_bytes();
    const GgufFile in = GgufFile::from_memory(f32.data(), f32.size(), "f32.gguf");
    for (const std::string& name : quant_mix_names()) {
      SCOPED_TRACE(name + " hidden " + std::to_string(hidden));
      GgufWriter w;
      quantize_model(in, *parse_quant_mix(name), w, pool);
      const std::vector<uint8_t> bytes = w.to_bytes();
      const auto model = Model::load_from_memory(bytes, name + ".gguf");
      Session session(model, SessionConfig{.n_ctx = 8, .n_threads = 1});
      const std::vector<int32_t> ids = {2, 50, 60};
      const auto logits = session.decode(ids);
      ASSERT_EQ(logits.size(), 300u);
      for (float v : logits) ASSERT_TRUE(std::isfinite(v));
    }
  }
}

TEST(QuantizeModel, RefusesQuantizedInputNamingTheTensor) {
  CHANNEL_REQUIRE_TESTDATA();
  const GgufFile in = GgufFile::open(test::testdata_path("models/gemma3-micro-q8_0.gguf"));
  ThreadPool pool(1);
  GgufWriter w;
  try {
    quantize_model(in, *parse_quant_mix("q4_k_m"), w, pool);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'token_embd.weight' is q8_0"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace channel
