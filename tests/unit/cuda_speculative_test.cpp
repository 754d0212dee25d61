// Speculative decoding on a CUDA device: a verify batch (the current token and its drafts,
// at most kVerifyTokens) gives each token's logits bit for bit as decoding it alone, so the
// n-gram and model drafters give exactly the greedy text of one-token decoding, the target
// and the draft model both on the device (CudaContextSession, `channel run --draft --device
// cuda`). Without a CUDA device the tests skip loudly.
#include <gtest/gtest.h>

#if !defined(CHANNEL_HAS_CUDA)

TEST(CudaSpeculative, BuiltWithoutCuda) {
  std::fprintf(stderr, "\n*** SKIPPED: this build has no CUDA backend (CHANNEL_CUDA) ***\n\n");
  GTEST_SKIP() << "this build has no CUDA backend";
}

#else

#include <memory>
#include <span>
#include <vector>

#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_session.h"
#include "cuda_test_util.h"
#include "runtime/cuda_context_session.h"
#include "runtime/speculative.h"

namespace channel {
namespace {

struct Case {
  Arch arch;
  GgmlType type;
};

std::shared_ptr<const Model> random_model(const Case& c, uint64_t seed = 1) {
  return test::small_random_model(c.arch, c.type, seed);
}

std::string name_of(const Case& c) {
  const char* arch = c.arch == Arch::llama    ? "llama"
                     : c.arch == Arch::gemma3 ? "gemma3"
                     : c.arch == Arch::qwen3  ? "qwen3"
                                              : "bounded";
  return std::string(arch) + "_" + ggml_type_name(static_cast<uint32_t>(c.type));
}

// A prompt that quotes itself, so prompt lookup has something to find.
std::vector<int32_t> repetitive_prompt() {
  std::vector<int32_t> p = {2};
  for (int rep = 0; rep < 3; ++rep)
    for (int i = 0; i < 12; ++i) p.push_back(10 + (i * 7) % 50);
  return p;
}

class CudaSpeculative : public ::testing::TestWithParam<Case> {};

// decode_all of 2 .. kVerifyTokens tokens (a captured graph of its own) against the same
// tokens decoded one at a time after the same prompt, and against its kernels launched
// without the graph: every row equal. With W_o's input written by attention in every form (the
// default; one token only: a batch converts it after) and without.
TEST_P(CudaSpeculative, VerifyBatchIsOneTokenDecodeBitForBit) {
  CHANNEL_REQUIRE_CUDA();
  const auto model = random_model(GetParam());
  auto weights = cuda::CudaWeights::upload(model, 0);
  const int n_vocab = model->hparams().n_vocab;
  const std::vector<int32_t> prompt = repetitive_prompt();
  const bool saved_form = cuda::attention_writes_every_form();
  for (int mode = 0; mode < 2; ++mode) {
    cuda::set_attention_writes_every_form(mode == 1);
    SCOPED_TRACE("kernels mode " + std::to_string(mode));
    for (int n : {2, 9, cuda::kVerifyTokens}) {
      cuda::CudaSession batch(weights, cuda::CudaSessionConfig{.n_ctx = 96, .n_batch = 64});
      cuda::CudaSession single(weights, cuda::CudaSessionConfig{.n_ctx = 96, .n_batch = 64});
      batch.decode(prompt);
      single.decode(prompt);
      std::vector<int32_t> tokens(static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) tokens[static_cast<size_t>(i)] = (i * 37 + 11) % n_vocab;
      const std::vector<float> all = batch.decode_all(tokens);
      ASSERT_EQ(all.size(), static_cast<size_t>(n) * n_vocab);
      {  // the batch's captured graph against the same kernels launched directly
        cuda::CudaSession plain(
            weights, cuda::CudaSessionConfig{.n_ctx = 96, .n_batch = 64, .graphs = false});
        plain.decode(prompt);
        EXPECT_EQ(plain.decode_all(tokens), all)
            << "batch of " << n << ": graph and direct launches";
      }
      for (int i = 0; i < n; ++i) {
        const std::span<const float> one =
            single.decode(std::span(&tokens[static_cast<size_t>(i)], 1));
        const std::vector<float> row(all.begin() + static_cast<ptrdiff_t>(i) * n_vocab,
                                     all.begin() + static_cast<ptrdiff_t>(i + 1) * n_vocab);
        EXPECT_EQ(row, std::vector<float>(one.begin(), one.end()))
            << "batch of " << n << ", token " << i;
      }
    }
  }
  cuda::set_attention_writes_every_form(saved_form);
}

// Greedy text with n-gram drafts, and with the target drafting for itself and another model
// drafting, both on the device: the one-token greedy text.
TEST_P(CudaSpeculative, DraftsGiveTheGreedyText) {
  CHANNEL_REQUIRE_CUDA();
  const auto model = random_model(GetParam());
  const auto other = random_model(GetParam(), 7);  // same vocabulary
  const int n_ctx = 160;
  auto session = [&](const std::shared_ptr<const Model>& m) {
    return std::make_unique<CudaContextSession>(m, 0, n_ctx, 1);
  };
  std::vector<int32_t> want;
  {
    auto plain = session(model);
    want = generate_greedy_speculative(*plain, repetitive_prompt(), 60, nullptr, 0);
  }
  ASSERT_EQ(want.size(), 60u);
  for (int draft_max : {1, 4, 8}) {
    auto target = session(model);
    NgramDrafter ngram(3);
    SpeculativeStats stats;
    const std::vector<int32_t> got = generate_greedy_speculative(*target, repetitive_prompt(), 60,
                                                                 &ngram, draft_max, {}, &stats);
    EXPECT_EQ(got, want) << "ngram, draft_max " << draft_max;
    EXPECT_GT(stats.drafted, 0);
  }
  for (const auto& draft_model : {model, other}) {
    auto target = session(model);
    ModelDrafter drafter(session(draft_model), *model);
    SpeculativeStats stats;
    const std::vector<int32_t> got =
        generate_greedy_speculative(*target, repetitive_prompt(), 60, &drafter, 5, {}, &stats);
    EXPECT_EQ(got, want) << (draft_model == model ? "self-draft" : "other model");
    if (draft_model == model) {
      EXPECT_GT(stats.acceptance(), 0.9);  // the target drafting for itself
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, CudaSpeculative,
    ::testing::Values(Case{Arch::llama, GgmlType::Q8_0}, Case{Arch::gemma3, GgmlType::Q4_0},
                      Case{Arch::gemma3, GgmlType::F16}, Case{Arch::qwen3, GgmlType::BF16},
                      Case{Arch::llama, GgmlType::F32}, Case{Arch::llama, GgmlType::Q4_K},
                      Case{Arch::gemma3, GgmlType::Q6_K}, Case{Arch::bounded, GgmlType::Q8_0}),
    [](const auto& info) { return name_of(info.param); });

}  // namespace
}  // namespace channel

#endif  // CHANNEL_HAS_CUDA
