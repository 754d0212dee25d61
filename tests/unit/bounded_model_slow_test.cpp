// The shipped bounded model (models/channel-bounded.gguf) against its trainer: perplexity of
// the first 32 held-out chunks (llama-perplexity protocol, n_ctx 1024) must match what the
// PyTorch reference measured on the same GGUF (20.558: train.py's ppl_llama_protocol on
// the memory fine-tuned model of train/results/mem11-r15a, max_chunks 32).
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include <gtest/gtest.h>

#include "model/model.h"
#include "runtime/session.h"

namespace channel {
namespace {

TEST(BoundedModelSlow, HeldOutPerplexityMatchesTheTrainer) {
  const std::filesystem::path root = CHANNEL_SOURCE_DIR;
  const auto model_path = root / "models" / "channel-bounded.gguf";
  // The first 32 x 1024 ids of the trainer's held-out set (train/data/pack/valid_ppl.bin).
  const auto ids_path = root / "tests" / "data" / "bounded_heldout_32x1024.u16";
  if (!std::filesystem::exists(model_path) || !std::filesystem::exists(ids_path)) {
    GTEST_SKIP() << "models/channel-bounded.gguf or the held-out ids are absent";
  }
  std::ifstream f(ids_path, std::ios::binary | std::ios::ate);
  const size_t bytes = static_cast<size_t>(f.tellg());
  f.seekg(0);
  std::vector<uint16_t> ids(bytes / 2);  // uint16 token ids
  f.read(reinterpret_cast<char*>(ids.data()), static_cast<std::streamsize>(ids.size() * 2));

  const auto model = Model::load(model_path.string());
  const int n_ctx = 1024, n_chunks = 32;
  ASSERT_GE(ids.size(), size_t{n_ctx} * n_chunks);
  SessionConfig c;
  c.n_ctx = n_ctx;
  Session s(model, c);
  const size_t n_vocab = static_cast<size_t>(model->hparams().n_vocab);
  double nll = 0;
  long count = 0;
  for (int chunk = 0; chunk < n_chunks; ++chunk) {
    std::vector<int32_t> row(ids.begin() + chunk * n_ctx, ids.begin() + (chunk + 1) * n_ctx);
    row[0] = 2;  // <bos>
    s.reset();
    const std::span<const float> logits = s.decode_all(row);  // [n_ctx][n_vocab]
    for (int t = n_ctx / 2; t < n_ctx - 1; ++t) {         // score the second half
      const float* l = logits.data() + static_cast<size_t>(t) * n_vocab;
      double mx = l[0];
      for (size_t i = 1; i < n_vocab; ++i) mx = std::max(mx, static_cast<double>(l[i]));
      double sum = 0;
      for (size_t i = 0; i < n_vocab; ++i) sum += std::exp(l[i] - mx);
      nll -= l[row[t + 1]] - mx - std::log(sum);
      ++count;
    }
  }
  const double ppl = std::exp(nll / static_cast<double>(count));
  std::printf("bounded model: held-out ppl over %d chunks of %d: %.4f (trainer 20.558)\n", n_chunks,
              n_ctx, ppl);
  EXPECT_NEAR(ppl, 20.558, 20.558 * 0.005);
}

}  // namespace
}  // namespace channel
