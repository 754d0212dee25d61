// Chunked prefill is bit-identical to token-by-token decoding at model level, for the
// bounded architecture with f32, f16 and q8_0 weights: Session and RingSession fed a sequence
// in chunks of 1, 3, 17, 64, W and more than W give the same logits bits at every position,
// the same bounded states (ring, counter and undo history) and, on the ring, the same K/V.
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/thread_pool.h"
#include "bounded/bounded_state.h"
#include "gguf/gguf_writer.h"
#include "model/model.h"
#include "model/random_model.h"
#include "runtime/ring_session.h"
#include "runtime/session.h"

namespace channel {
namespace {

constexpr int kWindow = 5;

std::shared_ptr<const Model> build(GgmlType type, std::vector<uint8_t>& bytes) {
  RandomModelSpec s;
  s.arch = Arch::bounded;
  s.hidden = 64;
  s.layers = 3;  // bounded, bounded, global
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 16;
  s.rope_dims = 8;
  s.ffn = 96;
  s.window = kWindow;
  s.sinks = 2;
  s.global_every = 3;
  s.vocab = 300;
  s.type = type;
  ThreadPool pool(1);
  GgufWriter w;
  write_random_model(s, w, pool);
  bytes = w.to_bytes();
  return Model::load_from_memory(bytes, "chunked.gguf");
}

std::vector<int32_t> sequence() {
  std::vector<int32_t> t;
  for (int i = 0; i < 160; ++i) t.push_back(2 + (i * 37 + i / 7) % 290);
  return t;
}

const int kChunks[] = {1, 3, 17, 64, kWindow, kWindow + 3};

bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class BoundedChunked : public ::testing::TestWithParam<GgmlType> {};

TEST_P(BoundedChunked, SessionChunksEqualTokenByToken) {
  std::vector<uint8_t> bytes;
  const auto model = build(GetParam(), bytes);
  const std::vector<int32_t> tokens = sequence();
  const size_t n_vocab = static_cast<size_t>(model->hparams().n_vocab);
  const SessionConfig config{192, 2, 64};
  Session ref(model, config);
  std::vector<float> want;  // [T][n_vocab]
  for (int32_t t : tokens) {
    const std::span<const float> l = ref.decode({&t, 1});
    want.insert(want.end(), l.begin(), l.end());
  }
  for (int chunk : kChunks) {
    Session s(model, config);
    for (size_t at = 0; at < tokens.size(); at += chunk) {
      const size_t n = std::min<size_t>(chunk, tokens.size() - at);
      const std::span<const float> got = s.decode_all(std::span<const int32_t>(tokens).subspan(at, n));
      ASSERT_TRUE(same_bits(got, std::span<const float>(want).subspan(at * n_vocab, n * n_vocab)))
          << "chunk " << chunk << " at token " << at;
    }
    for (int il = 0; il < model->hparams().n_layer; ++il)
      if (model->hparams().is_bounded(il)) {
        EXPECT_TRUE(s.bounded_state(il).bit_equal(ref.bounded_state(il)))
            << "chunk " << chunk << " layer " << il;
      }
  }
}

// On the ring (64 slots, 4 recall, 4 anchors, probe reserve 8) the sequence wraps and evicts.
TEST_P(BoundedChunked, RingSessionChunksEqualTokenByToken) {
  std::vector<uint8_t> bytes;
  const auto model = build(GetParam(), bytes);
  const ModelHparams& hp = model->hparams();
  const std::vector<int32_t> tokens = sequence();
  const std::span<const int32_t> all(tokens);
  const size_t n_vocab = static_cast<size_t>(hp.n_vocab);
  RingSessionConfig config;
  config.ring = RingConfig{64, 4, 8, 0};
  config.n_threads = 2;
  config.n_batch = 64;
  RingSession ref(model, config);
  ref.append(SpanType::system, all.first(4));
  ref.seal();
  std::vector<float> want;  // [T - 4][n_vocab]
  for (size_t i = 4; i < tokens.size(); ++i) {
    const std::span<const float> l =
        i == 4 ? ref.append(SpanType::user, all.subspan(i, 1)) : ref.decode(all.subspan(i, 1));
    want.insert(want.end(), l.begin(), l.end());
  }
  ASSERT_GT(ref.ring().evicted_spans(), 10u);
  for (int chunk : kChunks) {
    RingSession s(model, config);
    s.append(SpanType::system, all.first(4));
    s.seal();
    s.append(SpanType::user, all.subspan(4, 1));
    for (size_t at = 5; at < tokens.size(); at += chunk) {
      const size_t n = std::min<size_t>(chunk, tokens.size() - at);
      const std::span<const float> got = s.decode_all(all.subspan(at, n));
      ASSERT_TRUE(
          same_bits(got, std::span<const float>(want).subspan((at - 4) * n_vocab, n * n_vocab)))
          << "chunk " << chunk << " at token " << at;
    }
    EXPECT_EQ(state_diff(s.ring(), ref.ring()), "");
    for (int il = 0; il < hp.n_layer; ++il) {
      if (hp.is_bounded(il)) {
        EXPECT_TRUE(s.bounded_state(il).bit_equal(ref.bounded_state(il)))
            << "chunk " << chunk << " layer " << il;
        continue;
      }
      // Every live slot's K/V (free slots may hold older bytes on either side).
      const size_t hd = hp.head_dim;
      std::vector<float> k(hd), v(hd), rk(hd), rv(hd);
      for (uint32_t slot = 0; slot < config.ring.n_slots; ++slot) {
        if (!ref.ring().slot_live(slot)) continue;
        for (int h = 0; h < hp.n_head_kv; ++h) {
          s.kv_row(il, slot, h, k.data(), v.data());
          ref.kv_row(il, slot, h, rk.data(), rv.data());
          ASSERT_TRUE(same_bits(k, rk)) << "chunk " << chunk << " layer " << il << " slot " << slot;
          ASSERT_TRUE(same_bits(v, rv)) << "chunk " << chunk << " layer " << il << " slot " << slot;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, BoundedChunked,
                         ::testing::Values(GgmlType::F32, GgmlType::F16, GgmlType::Q8_0),
                         [](const auto& info) {
                           return std::string(info.param == GgmlType::F32   ? "f32"
                                              : info.param == GgmlType::F16 ? "f16"
                                                                            : "q8_0");
                         });

}  // namespace
}  // namespace channel
