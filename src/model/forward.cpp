#include "model/forward.h"

#include <algorithm>
#include <cmath>

#include "backend/cpu/layer_kernels.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/thread_pool.h"
#include "ops/activation.h"
#include "ops/norm.h"
#include "util/error.h"
#include "util/finite.h"

namespace channel {

ForwardScratch::ForwardScratch(const ModelHparams& hp, int max_batch_) : max_batch(max_batch_) {
  const auto n = static_cast<size_t>(max_batch);
  x.resize(n * hp.n_embd);
  xn.resize(n * hp.n_embd);
  q.resize(n * hp.n_head * hp.head_dim);
  k.resize(n * hp.n_head_kv * hp.head_dim);
  v.resize(n * hp.n_head_kv * hp.head_dim_v);
  attn.resize(n * hp.n_head * hp.head_dim_v);
  proj.resize(n * hp.n_embd);
  gate.resize(n * hp.n_ff);
  up.resize(n * hp.n_ff);
}

void PerHeadAttention::attend(int il, int n, float* q, float* k, const float* v, float* out,
                              ThreadPool& pool) {
  const int64_t hd = hp_.head_dim, hdv = hp_.head_dim_v;
  const int64_t q_dim = hp_.n_head * hd, kv_dim = hp_.n_head_kv * hd, v_dim = hp_.n_head_kv * hdv;
  const int group = hp_.n_head / hp_.n_head_kv;
  for (int a = 0; a < n;) {  // segment [a, b): store its K/V, then attend its queries
    const int b = std::clamp(segment_end(a, n), a + 1, n);
    for (int t = a; t < b; ++t) store(il, t, k + t * kv_dim, v + t * v_dim);
    pool.parallel_for(static_cast<int64_t>(b - a) * hp_.n_head_kv,
                      [&](int64_t begin, int64_t end, int thread) {
                        for (int64_t task = begin; task < end; ++task) {
                          const int t = a + static_cast<int>(task / hp_.n_head_kv);
                          const int hk = static_cast<int>(task % hp_.n_head_kv);
                          attend_head(il, t, hk, q + t * q_dim + hk * group * hd,
                                      out + t * hp_.n_head * hdv + hk * group * hdv, thread);
                        }
                      });
    a = b;
  }
}

namespace {

// Calls fn(i) for i in [0, n), spread over the pool.
template <typename Fn>
void for_rows(ThreadPool& pool, int64_t n, Fn&& fn) {
  pool.parallel_for(n, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) fn(i);
  });
}

void rms_norm_rows(ThreadPool& pool, const float* x, const std::vector<float>& w, int64_t n_rows,
                   int64_t n, float eps, float* y) {
  for_rows(pool, n_rows, [&](int64_t r) { rms_norm(x + r * n, w.data(), n, eps, y + r * n); });
}

void add_rows(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

// Non-finite activations (NaN or Inf weights, or an overflow) would otherwise flow silently
// into the logits and the sampler. The residual stream is checked after the embeddings and
// after every layer, O(n x n_embd) against the layer's O(n x n_embd x n_ff): the first place
// they appear is named.
void check_finite(const float* x, int64_t count, const char* where, int il) {
  if (all_finite(x, count)) return;
  if (il >= 0)
    throw_error(
        "forward: non-finite values (NaN or Inf) first appear in the output of layer "
        "{} (blk.{}): the model's weights or its input are damaged",
        il, il);
  throw_error(
      "forward: non-finite values (NaN or Inf) first appear in {}: the model's "
      "weights are damaged",
      where);
}

// Embeddings: x[t] = token_embd[token_t] * embd_scale.
void embed(const Model& model, std::span<const int32_t> tokens, float* x, ThreadPool& pool) {
  const ModelHparams& hp = model.hparams();
  const int64_t n_embd = hp.n_embd;
  for_rows(pool, static_cast<int64_t>(tokens.size()), [&](int64_t t) {
    float* xt = x + t * n_embd;
    dequantize_row(model.weights().token_embd, tokens[static_cast<size_t>(t)], xt);
    if (hp.embd_scale != 1.0f)
      for (int64_t i = 0; i < n_embd; ++i) xt[i] *= hp.embd_scale;
  });
}

// s.xn (the normed input) -> s.q, s.k, s.v, with the per-head q/k RMS norms of gemma3, qwen3
// and bounded layers. Bounded layers norm in the reference order of their operator
// (bounded/bounded_attention.h), the others with the SIMD norm.
void project_qkv(const ModelHparams& hp, const LayerWeights& L, bool bounded, int n,
                 ForwardScratch& s, ThreadPool& pool) {
  // q [n][n_head][head_dim], k [n][n_head_kv][head_dim], v [n][n_head_kv][head_dim_v]
  const WeightMatrix* qkv[] = {&L.wq, &L.wk, &L.wv};
  float* const out[] = {s.q.data(), s.k.data(), s.v.data()};
  matmul_fused(qkv, s.xn.data(), n, out, pool);
  if (!hp.has_qk_norm) return;
  const int64_t hd = hp.head_dim;
  const auto head_norm = bounded ? rms_norm_ref : rms_norm;
  for_rows(pool, n, [&](int64_t t) {
    float* qt = s.q.data() + t * hp.n_head * hd;
    float* kt = s.k.data() + t * hp.n_head_kv * hd;
    for (int h = 0; h < hp.n_head; ++h)
      head_norm(qt + h * hd, L.attn_q_norm.data(), hd, hp.rms_eps, qt + h * hd);
    for (int h = 0; h < hp.n_head_kv; ++h)
      head_norm(kt + h * hd, L.attn_k_norm.data(), hd, hp.rms_eps, kt + h * hd);
  });
}

// s.xn -> s.proj: W_down (act(W_gate x) * W_up x).
void feed_forward(const ModelHparams& hp, const LayerWeights& L, int n, ForwardScratch& s,
                  ThreadPool& pool) {
  const int64_t n_ff = hp.n_ff;
  const WeightMatrix* gate_up[] = {&L.ffn_gate, &L.ffn_up};
  float* const out[] = {s.gate.data(), s.up.data()};  // [n][n_ff] each
  matmul_fused(gate_up, s.xn.data(), n, out, pool);
  for_rows(pool, n, [&](int64_t t) {
    float* g = s.gate.data() + t * n_ff;
    const float* u = s.up.data() + t * n_ff;
    if (hp.gelu_ffn) {
      gelu_tanh_glu(g, u, n_ff, g);
    } else {
      silu_glu(g, u, n_ff, g);
    }
  });
  matmul(L.ffn_down, s.gate.data(), n, s.proj.data(), pool);  // [n][n_embd]
}

// x += (post-norm of) the sub-block's output s.proj.
void residual(const ModelHparams& hp, const std::vector<float>& post_norm, int n,
              ForwardScratch& s, ThreadPool& pool) {
  const int64_t n_embd = hp.n_embd;
  if (hp.has_post_norms)
    rms_norm_rows(pool, s.proj.data(), post_norm, n, n_embd, hp.rms_eps, s.proj.data());
  add_rows(s.x.data(), s.proj.data(), n * n_embd);
}

}  // namespace

void forward(const Model& model, const ForwardBatch& batch, LogitsFor which, ForwardScratch& s,
             ThreadPool& pool, float* logits) {
  const ModelHparams& hp = model.hparams();
  const ModelWeights& w = model.weights();
  const int n = static_cast<int>(batch.tokens.size());
  const int64_t n_embd = hp.n_embd;
  if (batch.layers.size() != static_cast<size_t>(hp.n_layer))
    throw_error("forward: attention for {} layers given, the model has {}", batch.layers.size(),
                hp.n_layer);

  embed(model, batch.tokens, s.x.data(), pool);
  check_finite(s.x.data(), n * n_embd, "the token embeddings (token_embd)", -1);

  for (int il = 0; il < hp.n_layer; ++il) {
    const LayerWeights& L = w.layers[static_cast<size_t>(il)];
    // Attention: norm -> Q/K/V -> the layer's attention -> W_o -> residual.
    rms_norm_rows(pool, s.x.data(), L.attn_norm, n, n_embd, hp.rms_eps, s.xn.data());
    project_qkv(hp, L, hp.is_bounded(il), n, s, pool);
    batch.layers[static_cast<size_t>(il)]->attend(il, n, s.q.data(), s.k.data(), s.v.data(),
                                                  s.attn.data(), pool);
    matmul(L.wo, s.attn.data(), n, s.proj.data(), pool);  // [n][n_embd]
    residual(hp, L.post_attention_norm, n, s, pool);
    // Feed-forward: norm -> FFN -> residual.
    rms_norm_rows(pool, s.x.data(), L.ffn_norm, n, n_embd, hp.rms_eps, s.xn.data());
    feed_forward(hp, L, n, s, pool);
    residual(hp, L.post_ffw_norm, n, s, pool);
    check_finite(s.x.data(), n * n_embd, "", il);
  }

  // Final norm and LM head, for the last token, all of them or none.
  if (which == LogitsFor::none) return;
  if (which == LogitsFor::hidden) {
    rms_norm_rows(pool, s.x.data(), w.output_norm, n, n_embd, hp.rms_eps, s.xn.data());
    return;
  }
  const int first = which == LogitsFor::last ? n - 1 : 0;
  const int n_out = n - first;
  rms_norm_rows(pool, s.x.data() + first * n_embd, w.output_norm, n_out, n_embd, hp.rms_eps,
                s.xn.data());
  matmul(w.output, s.xn.data(), n_out, logits, pool);  // [n_out][n_vocab]
  if (hp.final_logit_softcap > 0)
    softcap(logits, static_cast<int64_t>(n_out) * hp.n_vocab, hp.final_logit_softcap);
  check_finite(logits, static_cast<int64_t>(n_out) * hp.n_vocab,
               "the logits (output_norm / output)", -1);
}

}  // namespace channel
