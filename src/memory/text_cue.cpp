// Text encoding for episodic memory: a standalone forward pass over a text.
#include "memory/text_cue.h"

#include <algorithm>
#include <numeric>

#include "backend/cpu/thread_pool.h"
#include "memory/consolidation.h"
#include "memory/memory_attachment.h"
#include "model/forward.h"
#include "model/layer_attention.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace channel {

EncodedText encode_text(const Model& model, std::string_view text, int threads) {
  const ModelHparams& hp = model.hparams();
  if (hp.head_dim != hp.head_dim_v) {
    throw_error(
        "mem: the model's K and V head sizes differ ({} and {}); the store keeps one kv_dim",
        hp.head_dim, hp.head_dim_v);
  }
  const Tokenizer& tok = model.tokenizer();
  const std::vector<int32_t> all = tok.encode(text, tok.add_bos_default(), true);
  const int n = static_cast<int>(all.size());
  const int skip = (n > 0 && all[0] == tok.bos_id()) ? 1 : 0;
  if (n - skip <= 0) throw Error("mem: the text has no tokens");
  ContiguousAttention attention(model, n, n, threads);
  BoundedAttention bounded(model);
  const std::vector<LayerAttention*> layers = layer_attention(hp, bounded, attention);
  ForwardScratch scratch(hp, n);
  ThreadPool pool(threads);
  std::vector<int32_t> pos(static_cast<size_t>(n));  // [n] position == slot
  std::iota(pos.begin(), pos.end(), 0);
  attention.set_batch(pos, pos, [&](int il, int t) {
    const int w = hp.window_of(il);
    const int begin = w > 0 ? std::max(0, t - w + 1) : 0;
    return std::span<const int32_t>(pos).subspan(static_cast<size_t>(begin),
                                                 static_cast<size_t>(t + 1 - begin));
  });
  forward(model, ForwardBatch{all, layers}, LogitsFor::hidden, scratch, pool, nullptr);
  const KvCache& cache = attention.kv();
  EncodedText e;
  const size_t kept = static_cast<size_t>(n - skip), E = static_cast<size_t>(hp.n_embd);
  e.tokens.assign(all.begin() + skip, all.end());
  e.start = static_cast<uint64_t>(skip);
  // forward() leaves the final-norm rows of every token in scratch.xn with LogitsFor::hidden.
  e.hidden.assign(scratch.xn.begin() + static_cast<std::ptrdiff_t>(skip * E),
                  scratch.xn.begin() + static_cast<std::ptrdiff_t>(n * E));
  const size_t hd = static_cast<size_t>(hp.head_dim), nkv = static_cast<size_t>(hp.n_head_kv);
  const std::vector<int> globals = recall_layers(hp);
  e.kv.resize(globals.size() * 2 * kept * nkv * hd);
  for (size_t g = 0; g < globals.size(); ++g) {
    const int l = globals[g];
    for (int kvi = 0; kvi < 2; ++kvi) {
      for (size_t t = 0; t < kept; ++t) {
        for (size_t h = 0; h < nkv; ++h) {
          const float* src =
              (kvi == 0 ? cache.k(l, static_cast<int>(h)) : cache.v(l, static_cast<int>(h))) +
              (t + static_cast<size_t>(skip)) * hd;
          float* dst = e.kv.data() + ((g * 2 + kvi) * kept + t) * nkv * hd + h * hd;
          std::copy(src, src + hd, dst);
        }
      }
    }
  }
  return e;
}

std::vector<float> text_cue(const Model& model, std::string_view text, int threads) {
  return centroid_of(encode_text(model, text, threads).hidden,
                     static_cast<size_t>(model.hparams().n_embd));
}

}  // namespace channel
