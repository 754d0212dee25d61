// Embedder: a text's embedding is the text cue recall uses (the same vector, through the
// session's chunked forward), of unit length, and the same whatever came before it.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "memory/text_cue.h"
#include "memory/text_embedding.h"
#include "runtime/ring_session.h"
#include "runtime/session.h"
#include "support/micro_model.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace channel {
namespace {

double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

class TextEmbedding : public ::testing::TestWithParam<Arch> {};

TEST_P(TextEmbedding, IsTheTextCueOfUnitLength) {
  const auto model = test::load_model(test::micro_model_spec(GetParam()));
  const Tokenizer& tok = model->tokenizer();
  Embedder e(model, 1);
  EXPECT_EQ(e.dim(), model->hparams().n_embd);
  std::string long_text;  // longer than one forward chunk (512), so the session cuts it
  for (int i = 0; i < 90; ++i) long_text += "the harbour light " + std::to_string(i) + ". ";
  for (const std::string& text : {std::string("The code of the blue door is 4417."), long_text}) {
    const std::vector<int32_t> ids = tok.encode(text, tok.add_bos_default(), true);
    const std::vector<float> v = e.embed(ids);
    const std::vector<float> cue = text_cue(*model, text, 1);
    ASSERT_EQ(v.size(), cue.size());
    for (size_t i = 0; i < v.size(); ++i)
      EXPECT_NEAR(v[i], cue[i], 2e-5) << i << " of " << ids.size();
    EXPECT_NEAR(dot(v, v), 1.0, 1e-5);
  }
  // The session is reused: an input after a longer one is embedded as if alone.
  const std::vector<int32_t> a = tok.encode("a short one", tok.add_bos_default(), true);
  const std::vector<float> first = Embedder(model, 1).embed(a);
  EXPECT_EQ(e.embed(a), first);
  const std::vector<int32_t> b = tok.encode("something else entirely", tok.add_bos_default(), true);
  EXPECT_LT(dot(e.embed(b), first), 0.9999);
}

TEST_P(TextEmbedding, RefusesInputsWithoutTokens) {
  const auto model = test::load_model(test::micro_model_spec(GetParam()));
  Embedder e(model, 1);
  EXPECT_THROW(e.embed({}), Error);
  const int32_t bos[] = {model->tokenizer().bos_id()};
  EXPECT_THROW(e.embed(bos), Error);
  const int32_t outside[] = {5, model->hparams().n_vocab};
  EXPECT_THROW(e.embed(outside), Error);
  const int32_t fine[] = {5, 6};
  EXPECT_EQ(e.embed(fine).size(), static_cast<size_t>(e.dim()));  // a refusal left it usable
}

// A hidden-state source (a device's context: channel embed --device cuda) gives the same
// embedding as the CPU session when it computes the same rows; through SessionBase, the
// contiguous Session computes them and the slot ring refuses in one line.
TEST_P(TextEmbedding, TakesAHiddenStateSource) {
  const auto model = test::load_model(test::micro_model_spec(GetParam()));
  const std::vector<int32_t> ids =
      model->tokenizer().encode("The code of the blue door is 4417.", true, true);
  std::unique_ptr<SessionBase> session =
      std::make_unique<Session>(model, SessionConfig{.n_ctx = 64, .n_threads = 1});
  int calls = 0;
  Embedder source(model, [&](std::span<const int32_t> t, std::vector<float>& rows) {
    ++calls;
    session->reset();
    session->hidden_states(t, rows);
  });
  EXPECT_EQ(source.embed(ids), Embedder(model, 1).embed(ids));
  EXPECT_EQ(calls, 1);
  RingSession ring(model, RingSessionConfig{});
  std::vector<float> rows;
  EXPECT_THROW(static_cast<SessionBase&>(ring).hidden_states(ids, rows), Error);
}

INSTANTIATE_TEST_SUITE_P(Archs, TextEmbedding,
                         ::testing::Values(Arch::llama, Arch::gemma3, Arch::bounded),
                         test::arch_test_name);

}  // namespace
}  // namespace channel
