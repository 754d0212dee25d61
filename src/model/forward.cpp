#include "model/forward.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/thread_pool.h"
#include "bounded/bounded_attention.h"
#include "ops/activation.h"
#include "ops/attention.h"
#include "backend/cpu/matmul.h"
#include "ops/norm.h"
#include "ops/rope.h"
#include "util/error.h"

namespace channel {

ForwardScratch::ForwardScratch(const ModelHparams& hp, int max_batch_, int n_slots, int n_threads)
    : max_batch(max_batch_) {
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
  rope_global.resize(n * hp.n_rot);
  rope_sliding.resize(n * hp.n_rot);
  scores.resize(static_cast<size_t>(n_threads) * n_slots);
  if (hp.arch_id == Arch::bounded) {
    BoundedAttnCfg c;  // only the sizes matter for the scratch
    c.n_heads = hp.n_head;
    c.n_kv_heads = hp.n_head_kv;
    c.head_dim = hp.head_dim;
    bounded = std::make_unique<BoundedScratch>(c, max_batch);
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
  for (int64_t i = 0; i < count; ++i) {
    if (!std::isfinite(x[i])) {
      if (il >= 0)
        throw_error("forward: non-finite values (NaN or Inf) first appear in the output of layer "
                    "{} (blk.{}): the model's weights or its input are damaged",
                    il, il);
      throw_error("forward: non-finite values (NaN or Inf) first appear in {}: the model's "
                  "weights are damaged",
                  where);
    }
  }
}

void forward_impl(const Model& model, KvCache* kv_cache, const ForwardBatch& batch, LogitsFor which,
                  ForwardScratch& s, ThreadPool& pool, float* logits) {
  const ModelHparams& hp = model.hparams();
  const ModelWeights& w = model.weights();
  const int n = static_cast<int>(batch.tokens.size());
  const int64_t n_embd = hp.n_embd, n_ff = hp.n_ff, hd = hp.head_dim, hdv = hp.head_dim_v;
  const int64_t q_dim = hp.n_head * hd, kv_dim = hp.n_head_kv * hd, v_dim = hp.n_head_kv * hdv;
  const int group = hp.n_head / hp.n_head_kv;  // query heads per KV head
  AttentionBackend* backend = batch.attention;

  // Embeddings: x[t] = token_embd[token_t] * embd_scale.
  for_rows(pool, n, [&](int64_t t) {
    float* xt = s.x.data() + t * n_embd;
    dequantize_row(w.token_embd, batch.tokens[static_cast<size_t>(t)], xt);
    if (hp.embd_scale != 1.0f)
      for (int64_t i = 0; i < n_embd; ++i) xt[i] *= hp.embd_scale;
  });

  check_finite(s.x.data(), n * n_embd, "the token embeddings (token_embd)", -1);

  // Rope angles of every position, for global and sliding layers.
  const float* freq_factors = w.rope_freqs.empty() ? nullptr : w.rope_freqs.data();
  const RopeParams rope_global{hp.rope_style, hp.n_rot, hp.rope_base, hp.rope_freq_scale,
                               freq_factors};
  const RopeParams rope_sliding{hp.rope_style, hp.n_rot, hp.rope_base_swa, 1.0f, freq_factors};
  for (int t = 0; t < n && !backend; ++t) {
    rope_angles(rope_global, batch.positions[t], s.rope_global.data() + t * hp.n_rot);
    if (hp.sliding_window > 0)
      rope_angles(rope_sliding, batch.positions[t], s.rope_sliding.data() + t * hp.n_rot);
  }

  for (int il = 0; il < hp.n_layer; ++il) {
    const LayerWeights& L = w.layers[static_cast<size_t>(il)];
    const bool sliding = hp.is_sliding(il);
    const RopeParams& rope = sliding ? rope_sliding : rope_global;
    const float* angles = sliding ? s.rope_sliding.data() : s.rope_global.data();

    // --- attention block ---------------------------------------------------------------
    rms_norm_rows(pool, s.x.data(), L.attn_norm, n, n_embd, hp.rms_eps, s.xn.data());
    if (hp.is_bounded(il)) {  // swa_sink_v1: ring of W raw keys + S sinks, no positions
      const BoundedWeights bw{L.wq,
                              L.wk,
                              L.wv,
                              L.wo,
                              L.attn_q_norm.data(),
                              L.attn_k_norm.data(),
                              L.sinks.k.data(),
                              L.sinks.v.data()};
      bounded_attention_batch(w.bounded_cfg, bw, kv_cache->bounded(il), s.xn.data(), n,
                              s.proj.data(), *s.bounded, pool);  // [n][n_embd]
    } else {
      matmul(L.wq, s.xn.data(), n, s.q.data(), pool);  // [n][n_head][head_dim]
      matmul(L.wk, s.xn.data(), n, s.k.data(), pool);  // [n][n_head_kv][head_dim]
      matmul(L.wv, s.xn.data(), n, s.v.data(), pool);  // [n][n_head_kv][head_dim_v]

      for_rows(pool, n, [&](int64_t t) {
        float* qt = s.q.data() + t * q_dim;
        float* kt = s.k.data() + t * kv_dim;
        if (hp.has_qk_norm) {  // per-head RMSNorm before rope (gemma3, qwen3)
          for (int h = 0; h < hp.n_head; ++h)
            rms_norm(qt + h * hd, L.attn_q_norm.data(), hd, hp.rms_eps, qt + h * hd);
          for (int h = 0; h < hp.n_head_kv; ++h)
            rms_norm(kt + h * hd, L.attn_k_norm.data(), hd, hp.rms_eps, kt + h * hd);
        }
        if (backend) return;  // the backend rotates (kv/virtual_positions.h)
        rope_apply(rope, angles + t * hp.n_rot, qt, hp.n_head, static_cast<int>(hd));
        rope_apply(rope, angles + t * hp.n_rot, kt, hp.n_head_kv, static_cast<int>(hd));
      });

      if (backend) {
        for (int a = 0; a < n;) {
          const int b = std::clamp(backend->segment_end(a, n), a + 1, n);
          for (int t = a; t < b; ++t)
            backend->store(il, t, s.k.data() + t * kv_dim, s.v.data() + t * v_dim);
          pool.parallel_for(static_cast<int64_t>(b - a) * hp.n_head_kv,
                            [&](int64_t begin, int64_t end, int thread) {
                              for (int64_t task = begin; task < end; ++task) {
                                const int t = a + static_cast<int>(task / hp.n_head_kv);
                                const int hk = static_cast<int>(task % hp.n_head_kv);
                                backend->attend(
                                    il, t, hk, s.q.data() + t * q_dim + hk * group * hd,
                                    s.attn.data() + t * hp.n_head * hdv + hk * group * hdv,
                                    thread);
                              }
                            });
          a = b;
        }
        matmul(L.wo, s.attn.data(), n, s.proj.data(), pool);  // [n][n_embd]
      } else {
        KvCache& kv = *kv_cache;
        const int64_t n_slots = kv.n_slots();

        // Store this batch's keys/values in their slots; queries then see them like any other.
        for (int t = 0; t < n; ++t) {
          const int64_t slot = batch.slots[t];
          for (int h = 0; h < hp.n_head_kv; ++h) {
            std::memcpy(kv.k(il, h) + slot * hd, s.k.data() + t * kv_dim + h * hd,
                        sizeof(float) * hd);
            std::memcpy(kv.v(il, h) + slot * hdv, s.v.data() + t * v_dim + h * hdv,
                        sizeof(float) * hdv);
          }
        }

        // One task per (query token, query head).
        pool.parallel_for(static_cast<int64_t>(n) * hp.n_head, [&](int64_t begin, int64_t end,
                                                                   int thread) {
          float* scores = s.scores.data() + static_cast<int64_t>(thread) * n_slots;  // [n_slots]
          for (int64_t task = begin; task < end; ++task) {
            const int t = static_cast<int>(task / hp.n_head),
                      h = static_cast<int>(task % hp.n_head);
            const int hk = h / group;
            const AttentionHead head{kv.k(il, hk), kv.v(il, hk), static_cast<int>(hd),
                                     static_cast<int>(hdv)};
            attend(s.q.data() + t * q_dim + h * hd, head, batch.visible_slots(il, t), hp.attn_scale,
                   scores, s.attn.data() + t * hp.n_head * hdv + h * hdv);
          }
        });
        matmul(L.wo, s.attn.data(), n, s.proj.data(), pool);  // [n][n_embd]
      }
    }
    if (hp.has_post_norms)
      rms_norm_rows(pool, s.proj.data(), L.post_attention_norm, n, n_embd, hp.rms_eps,
                    s.proj.data());
    add_rows(s.x.data(), s.proj.data(), n * n_embd);

    // --- feed-forward block --------------------------------------------------------------
    rms_norm_rows(pool, s.x.data(), L.ffn_norm, n, n_embd, hp.rms_eps, s.xn.data());
    matmul(L.ffn_gate, s.xn.data(), n, s.gate.data(), pool);  // [n][n_ff]
    matmul(L.ffn_up, s.xn.data(), n, s.up.data(), pool);      // [n][n_ff]
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
    if (hp.has_post_norms)
      rms_norm_rows(pool, s.proj.data(), L.post_ffw_norm, n, n_embd, hp.rms_eps, s.proj.data());
    add_rows(s.x.data(), s.proj.data(), n * n_embd);
    check_finite(s.x.data(), n * n_embd, "", il);
  }

  // Final norm and LM head, for the last token or all of them.
  if (which == LogitsFor::none) return;
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

}  // namespace

void forward(const Model& model, KvCache& kv, const ForwardBatch& batch, LogitsFor which,
             ForwardScratch& scratch, ThreadPool& pool, float* logits) {
  forward_impl(model, &kv, batch, which, scratch, pool, logits);
}

void forward(const Model& model, const ForwardBatch& batch, LogitsFor which,
             ForwardScratch& scratch, ThreadPool& pool, float* logits) {
  if (!batch.attention) throw_error("forward: no KV cache and no attention backend");
  if (model.hparams().arch_id == Arch::bounded)
    throw_error("forward: an attention backend cannot run bounded layers");
  forward_impl(model, nullptr, batch, which, scratch, pool, logits);
}

}  // namespace channel
