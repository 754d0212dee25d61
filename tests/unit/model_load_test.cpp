// Model loading and session input checks on small generated models: hyperparameters from
// metadata, and one clear channel::Error for each kind of bad model or bad input.
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/thread_pool.h"
#include "gguf/gguf_writer.h"
#include "model/model.h"
#include "model/random_model.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace channel {
namespace {

RandomModelSpec tiny(Arch arch) {
  RandomModelSpec s;
  s.arch = arch;
  s.hidden = 64;
  s.layers = 2;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 16;
  s.ffn = 96;
  s.window = 4;
  s.window_pattern = 2;
  s.vocab = 300;
  return s;
}

// Owns the bytes a model borrows: keep it alive as long as the model.
struct Built {
  std::vector<uint8_t> bytes;
  std::shared_ptr<const Model> load() const { return Model::load_from_memory(bytes, "test.gguf"); }
};

Built build(const RandomModelSpec& spec, const std::set<std::string>& skip = {},
            const std::function<void(GgufWriter&)>& extra = {}) {
  ThreadPool pool(1);
  GgufWriter w;
  write_random_model(spec, w, pool, skip);
  if (extra) extra(w);
  return {w.to_bytes()};
}

// Expects load() to throw a channel::Error whose message contains `text`.
void expect_load_error(const Built& b, const std::string& text) {
  try {
    b.load();
    ADD_FAILURE() << "no error; expected one mentioning: " << text;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "one line: " << e.what();
  }
}

TEST(ModelLoad, ReadsLlamaHyperparameters) {
  const Built built = build(tiny(Arch::llama));
  const auto model = built.load();
  const ModelHparams& hp = model->hparams();
  EXPECT_EQ(hp.arch, "llama");
  EXPECT_EQ(hp.n_vocab, 300);
  EXPECT_EQ(hp.n_embd, 64);
  EXPECT_EQ(hp.n_layer, 2);
  EXPECT_EQ(hp.n_head, 4);
  EXPECT_EQ(hp.n_head_kv, 2);
  EXPECT_EQ(hp.head_dim, 16);
  EXPECT_EQ(hp.n_ff, 96);
  EXPECT_EQ(hp.rope_style, RopeStyle::normal);
  EXPECT_FLOAT_EQ(hp.rms_eps, 1e-5f);
  EXPECT_FALSE(hp.is_sliding(0));
  EXPECT_TRUE(model->weights().tied_output);
  EXPECT_EQ(model->tokenizer().n_vocab(), 300);
  EXPECT_GT(model->weight_bytes(), 64u * 300u * 4u);
}

TEST(ModelLoad, ReadsGemma3HyperparametersAndLayerPattern) {
  const Built built = build(tiny(Arch::gemma3));
  const auto model = built.load();
  const ModelHparams& hp = model->hparams();
  EXPECT_EQ(hp.arch, "gemma3");
  EXPECT_EQ(hp.rope_style, RopeStyle::neox);
  EXPECT_EQ(hp.sliding_window, 4);
  EXPECT_TRUE(hp.is_sliding(0));  // pattern 2: layer 1 is global
  EXPECT_FALSE(hp.is_sliding(1));
  EXPECT_FLOAT_EQ(hp.rope_base_of(0), 1e4f);
  EXPECT_FLOAT_EQ(hp.rope_base_of(1), 1e6f);
  EXPECT_FLOAT_EQ(hp.embd_scale, 8.0f);
  EXPECT_FLOAT_EQ(hp.attn_scale, 0.25f);
  EXPECT_EQ(hp.final_logit_softcap, 0.0f);
}

TEST(ModelLoad, OptionalGemma3KeysAreHonoured) {
  const Built built = build(tiny(Arch::gemma3), {}, [](GgufWriter& w) {
    w.set_f32("gemma3.attention.query_pre_attn_scalar", 64.0f);
    w.set_f32("gemma3.final_logit_softcapping", 30.0f);
    w.set_string("gemma3.rope.scaling.type", "linear");
    w.set_f32("gemma3.rope.scaling.factor", 8.0f);
  });
  const auto model = built.load();
  const ModelHparams& hp = model->hparams();
  EXPECT_FLOAT_EQ(hp.attn_scale, 0.125f);
  EXPECT_FLOAT_EQ(hp.final_logit_softcap, 30.0f);
  EXPECT_FLOAT_EQ(hp.rope_scale_of(1), 0.125f);  // global layer
  EXPECT_FLOAT_EQ(hp.rope_scale_of(0), 1.0f);    // sliding layer
  Session session(model, SessionConfig{.n_ctx = 8, .n_threads = 1});
  const std::vector<int32_t> ids = {2, 100, 200};
  for (float l : session.decode(ids)) ASSERT_LE(std::abs(l), 30.0f);
}

TEST(ModelLoad, ReadsQwen3HyperparametersAndQKNorms) {
  const Built b = build(tiny(Arch::qwen3));
  const auto model = b.load();
  const ModelHparams& hp = model->hparams();
  EXPECT_EQ(hp.arch_id, Arch::qwen3);
  EXPECT_EQ(hp.rope_style, RopeStyle::neox);
  EXPECT_TRUE(hp.has_qk_norm);
  EXPECT_FALSE(hp.has_post_norms);
  EXPECT_FALSE(hp.gelu_ffn);
  EXPECT_EQ(hp.embd_scale, 1.0f);
  EXPECT_EQ(hp.sliding_window, 0);
  EXPECT_EQ(model->weights().layers[1].attn_k_norm.size(), 16u);
  Session session(model, SessionConfig{.n_ctx = 8, .n_threads = 1});
  const std::vector<int32_t> ids = {2, 7, 9};
  EXPECT_TRUE(std::isfinite(session.decode(ids)[0]));
  expect_load_error(build(tiny(Arch::qwen3), {"blk.1.attn_k_norm.weight"}),
                    "tensor 'blk.1.attn_k_norm.weight' is missing");
}

TEST(ModelLoad, GenerationIsDeterministic) {
  EXPECT_EQ(build(tiny(Arch::gemma3)).bytes, build(tiny(Arch::gemma3)).bytes);
  RandomModelSpec other = tiny(Arch::gemma3);
  other.seed = 2;
  EXPECT_NE(build(tiny(Arch::gemma3)).bytes, build(other).bytes);
}

TEST(ModelLoad, EveryWeightTypeLoadsAndDecodes) {
  for (GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0,
                        GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1}) {
    RandomModelSpec spec = tiny(Arch::llama);
    spec.type = type;
    const Built built = build(spec);
    const auto model = built.load();
    Session session(model, SessionConfig{.n_ctx = 8, .n_threads = 1});
    const std::vector<int32_t> ids = {2, 7, 9};
    const auto logits = session.decode(ids);
    EXPECT_EQ(logits.size(), 300u);
    EXPECT_TRUE(std::isfinite(logits[0]));
  }
}

// Every block type Channel writes (`channel mkmodel --type`) loads and decodes, and its
// logits follow the f32 model's (K-quants on rows of 256).
TEST(ModelLoad, EveryQuantizedTypeFollowsTheF32Model) {
  struct Case {
    GgmlType type;
    double min_cosine;
  };
  // For scale (testdata README section 5): llama-quantize's files sit at cosine 0.71 (q2_k)
  // to 0.996 (q6_k) from their f32 sources.
  const Case cases[] = {{GgmlType::Q4_1, 0.95},  {GgmlType::Q5_0, 0.98}, {GgmlType::Q5_1, 0.98},
                        {GgmlType::Q2_K, 0.65},  {GgmlType::Q3_K, 0.85}, {GgmlType::Q4_K, 0.94},
                        {GgmlType::Q5_K, 0.985}, {GgmlType::Q6_K, 0.995}};
  RandomModelSpec spec = tiny(Arch::gemma3);
  spec.hidden = 256;
  spec.head_dim = 64;
  spec.ffn = 512;
  const std::vector<int32_t> ids = {2, 7, 9, 40, 41};
  const Built f32 = build(spec);
  Session ref(f32.load(), SessionConfig{.n_ctx = 8, .n_threads = 1});
  const auto want_span = ref.decode(ids);
  const std::vector<float> want(want_span.begin(), want_span.end());
  for (const Case& c : cases) {
    spec.type = c.type;
    const Built built = build(spec);
    Session session(built.load(), SessionConfig{.n_ctx = 8, .n_threads = 1});
    const auto got = session.decode(ids);
    ASSERT_EQ(got.size(), want.size());
    double dot = 0, ng = 0, nw = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      dot += static_cast<double>(got[i]) * want[i];
      ng += static_cast<double>(got[i]) * got[i];
      nw += static_cast<double>(want[i]) * want[i];
    }
    EXPECT_GE(dot / std::sqrt(ng * nw), c.min_cosine)
        << ggml_type_name(static_cast<uint32_t>(c.type));
  }
}

TEST(ModelLoad, SyntheticPiecesAreDistinctAndShortestFirst) {
  std::set<std::string> seen;
  for (int id = 260; id < 260 + 40000; ++id) ASSERT_TRUE(seen.insert(synthetic_piece(id)).second);
  EXPECT_EQ(synthetic_piece(260),
            "\xe2\x96\x81"
            "a");  // "▁a"
  EXPECT_EQ(synthetic_piece(260 + 26), "a");
  EXPECT_EQ(synthetic_piece(260 + 52),
            "\xe2\x96\x81"
            "aa");
}

TEST(ModelLoad, UnknownArchitecture) {
  const Built b = build(tiny(Arch::llama), {"general.architecture"},
                        [](GgufWriter& w) { w.set_string("general.architecture", "mamba"); });
  expect_load_error(b, "unknown architecture 'mamba'");
}

TEST(ModelLoad, MissingHyperparameter) {
  expect_load_error(build(tiny(Arch::llama), {"llama.block_count"}),
                    "missing hyperparameter 'llama.block_count'");
  expect_load_error(build(tiny(Arch::gemma3), {"gemma3.attention.layer_norm_rms_epsilon"}),
                    "missing hyperparameter 'gemma3.attention.layer_norm_rms_epsilon'");
}

TEST(ModelLoad, InconsistentHyperparameters) {
  const Built b = build(tiny(Arch::llama), {"llama.attention.head_count_kv"},
                        [](GgufWriter& w) { w.set_u32("llama.attention.head_count_kv", 3); });
  expect_load_error(b, "'llama.attention.head_count_kv' = 3 does not divide");
}

TEST(ModelLoad, MissingTensor) {
  expect_load_error(build(tiny(Arch::llama), {"blk.1.ffn_up.weight"}),
                    "tensor 'blk.1.ffn_up.weight' is missing");
  expect_load_error(build(tiny(Arch::gemma3), {"blk.0.attn_q_norm.weight"}),
                    "tensor 'blk.0.attn_q_norm.weight' is missing");
}

TEST(ModelLoad, TensorWithWrongShape) {
  const Built b = build(tiny(Arch::llama), {"blk.0.attn_k.weight"}, [](GgufWriter& w) {
    w.add_tensor("blk.0.attn_k.weight", GgmlType::F32, {64, 64}, std::vector<uint8_t>(64 * 64 * 4));
  });
  expect_load_error(b, "tensor 'blk.0.attn_k.weight' has shape [64, 64], expected [64, 32]");
}

TEST(ModelLoad, VocabularyAndEmbeddingDisagree) {
  RandomModelSpec spec = tiny(Arch::llama);
  const Built b = build(spec, {"token_embd.weight"}, [](GgufWriter& w) {
    w.add_tensor("token_embd.weight", GgmlType::F32, {64, 299}, std::vector<uint8_t>(64 * 299 * 4));
  });
  expect_load_error(b, "the tokenizer has 300 tokens but token_embd.weight has 299 rows");
}

class SessionInput : public ::testing::Test {
 protected:
  Built built_ = build(tiny(Arch::llama));
  std::shared_ptr<const Model> model_ = built_.load();
  Session session_{model_, SessionConfig{.n_ctx = 6, .n_threads = 1}};
};

TEST_F(SessionInput, TokenOutsideVocabulary) {
  const std::vector<int32_t> ids = {2, 300};
  EXPECT_THROW(
      {
        try {
          session_.decode(ids);
        } catch (const Error& e) {
          EXPECT_STREQ(e.what(), "token id 300 at index 1 is outside the vocabulary (n_vocab 300)");
          throw;
        }
      },
      Error);
  const std::vector<int32_t> negative = {-1};
  EXPECT_THROW(session_.decode(negative), Error);
  EXPECT_EQ(session_.n_past(), 0);
}

TEST_F(SessionInput, ContextOverflowLeavesStateUnchanged) {
  const std::vector<int32_t> four = {2, 5, 6, 7};
  session_.decode(four);
  const std::vector<int32_t> three = {8, 9, 10};
  try {
    session_.decode(three);
    ADD_FAILURE() << "no error for a context overflow";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "context full: 4 tokens already held + 3 new exceed n_ctx 6");
  }
  EXPECT_EQ(session_.n_past(), 4);
  const std::vector<int32_t> two = {8, 9};  // fits exactly
  session_.decode(two);
  EXPECT_EQ(session_.n_past(), 6);
  session_.reset();
  EXPECT_EQ(session_.n_past(), 0);
}

TEST_F(SessionInput, EmptyDecodeIsAnError) {
  EXPECT_THROW(session_.decode(std::span<const int32_t>()), Error);
}

TEST_F(SessionInput, BadConfigIsAnError) {
  EXPECT_THROW(Session(model_, SessionConfig{.n_ctx = 0}), Error);
}

}  // namespace
}  // namespace channel
