// The `bounded` architecture end to end on small random models with mixed layer types:
// loading, one clear load error per bad header or sink tensor, and sessions (chunked prefill
// vs decode, bit for bit: see also bounded_chunked_test; and reset).
#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/thread_pool.h"
#include "gguf/gguf_writer.h"
#include "model/model.h"
#include "model/random_model.h"
#include "runtime/session.h"
#include "util/error.h"

namespace channel {
namespace {

RandomModelSpec tiny_bounded() {
  RandomModelSpec s;
  s.arch = Arch::bounded;
  s.hidden = 64;
  s.layers = 3;  // bounded, bounded, global
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 16;
  s.rope_dims = 8;  // partial rotary
  s.ffn = 96;
  s.window = 5;
  s.sinks = 2;
  s.global_every = 3;
  s.vocab = 300;
  return s;
}

struct Built {
  std::vector<uint8_t> bytes;
  std::shared_ptr<const Model> load() const { return Model::load_from_memory(bytes, "b.gguf"); }
};

Built build(const RandomModelSpec& spec, const std::set<std::string>& skip = {},
            const std::function<void(GgufWriter&)>& extra = {}) {
  ThreadPool pool(1);
  GgufWriter w;
  write_random_model(spec, w, pool, skip);
  if (extra) extra(w);
  return {w.to_bytes()};
}

void expect_load_error(const Built& b, const std::string& text) {
  try {
    b.load();
    ADD_FAILURE() << "no error; expected one mentioning: " << text;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
  }
}

std::vector<uint8_t> zeros_f32(size_t n) {
  return std::vector<uint8_t>(n * sizeof(float), 0);
}

TEST(BoundedModel, LoadsMixedLayerTypes) {
  const Built built = build(tiny_bounded());
  const auto model = built.load();
  const ModelHparams& hp = model->hparams();
  EXPECT_EQ(hp.arch_id, Arch::bounded);
  EXPECT_TRUE(hp.is_bounded(0));
  EXPECT_TRUE(hp.is_bounded(1));
  EXPECT_FALSE(hp.is_bounded(2));
  EXPECT_FALSE(hp.is_sliding(0));
  EXPECT_EQ(hp.n_rot, 8);
  EXPECT_EQ(hp.bounded.window, 5);
  EXPECT_EQ(hp.bounded.n_sinks, 2);
  const ModelWeights& w = model->weights();
  EXPECT_EQ(w.layers[0].sinks.k.size(), 2u * 2 * 16);
  EXPECT_TRUE(w.layers[2].sinks.k.empty());
  ASSERT_NE(w.bounded_rope, nullptr);
  EXPECT_EQ(w.bounded_cfg.rope, w.bounded_rope.get());
  EXPECT_EQ(w.bounded_rope->window(), 5);
  EXPECT_EQ(w.bounded_rope->half(), 4);
}

TEST(BoundedModel, BadHeadersAndSinksAreLoadErrors) {
  const RandomModelSpec s = tiny_bounded();
  expect_load_error(build(s, {"bounded.attention.window"},
                          [](GgufWriter& w) { w.set_u32("bounded.attention.window", 0); }),
                    "bounded.attention.window = 0");
  expect_load_error(build(s, {"bounded.attention.sink_count"},
                          [](GgufWriter& w) { w.set_u32("bounded.attention.sink_count", 300); }),
                    "bounded.attention.sink_count = 300");
  expect_load_error(build(s, {"bounded.rope.dimension_count"},
                          [](GgufWriter& w) { w.set_u32("bounded.rope.dimension_count", 18); }),
                    "bounded.rope.dimension_count");
  expect_load_error(build(s, {"bounded.attention.layer_types"},
                          [](GgufWriter& w) {
                            w.set_u32_array("bounded.attention.layer_types", {0, 1});
                          }),
                    "layer_types has 2 entries");
  // A sink tensor whose shape disagrees with the header (S = 3 instead of 2).
  expect_load_error(build(s, {"blk.1.attn_sink_k.weight"},
                          [](GgufWriter& w) {
                            w.add_tensor("blk.1.attn_sink_k.weight", GgmlType::F32, {16, 3, 2},
                                         zeros_f32(16 * 3 * 2));
                          }),
                    "blk.1.attn_sink_k.weight' has shape [16, 3, 2, 1]");
  expect_load_error(build(s, {"blk.0.attn_sink_v.weight"}), "lacks tensor 'blk.0.attn_sink_v");
  expect_load_error(build(s, {},
                          [](GgufWriter& w) {
                            w.add_tensor("blk.2.attn_sink_k.weight", GgmlType::F32, {16, 2, 2},
                                         zeros_f32(16 * 2 * 2));
                          }),
                    "layer 2 is global");
}

// Relative max-norm difference of two logit rows.
double rel_diff(const float* a, const float* b, size_t n) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < n; ++i) {
    err = std::max(err, std::fabs(static_cast<double>(a[i]) - b[i]));
    ref = std::max(ref, std::fabs(static_cast<double>(b[i])));
  }
  return err / ref;
}

TEST(BoundedModel, ChunkedPrefillMatchesTokenByTokenDecode) {
  const Built built = build(tiny_bounded());
  const auto model = built.load();
  const size_t n_vocab = static_cast<size_t>(model->hparams().n_vocab);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 40; ++i) tokens.push_back(2 + (i * 37) % 290);

  SessionConfig one;
  one.n_ctx = 64;
  one.n_threads = 2;
  Session ref(model, one);
  std::vector<float> ref_logits;  // [T][n_vocab]
  for (int32_t t : tokens) {
    const auto l = ref.decode(std::span<const int32_t>(&t, 1));
    ref_logits.insert(ref_logits.end(), l.begin(), l.end());
  }
  for (int batch : {3, 17, 64}) {
    SessionConfig c = one;
    c.n_batch = batch;
    Session s(model, c);
    const std::span<const float> all = s.decode_all(tokens);
    for (size_t t = 0; t < tokens.size(); ++t) {
      EXPECT_EQ(rel_diff(all.data() + t * n_vocab, ref_logits.data() + t * n_vocab, n_vocab), 0)
          << "batch " << batch << " token " << t;
    }
  }
}

TEST(BoundedModel, ResetRestartsTheRings) {
  const Built built = build(tiny_bounded());
  const auto model = built.load();
  SessionConfig c;
  c.n_ctx = 64;
  c.n_threads = 1;
  Session s(model, c);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 30; ++i) tokens.push_back(5 + i);
  const std::span<const float> f = s.decode_all(tokens);
  const std::vector<float> first(f.begin(), f.end());
  s.reset();
  const std::span<const float> a = s.decode_all(tokens);
  const std::vector<float> again(a.begin(), a.end());
  EXPECT_EQ(first, again);
}

}  // namespace
}  // namespace channel
