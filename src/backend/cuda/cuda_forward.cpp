// The device layer stack (see cuda_forward.h).
#include "backend/cuda/cuda_forward.h"

#include <algorithm>
#include <initializer_list>

namespace channel::cuda {

int attention_splits(int n, int n_head_kv, int sm_count) {
  if (n <= kVerifyTokens) n = 1;  // each query split as a single token's (kVerifyTokens)
  const int want = (2 * sm_count + n_head_kv * n - 1) / (n_head_kv * n);
  return std::clamp(want, 1, 64);
}

// Decode can run the fused activation stages (cuda_kernels.h: norm_quant, glu_quant) when the
// parts of q|k|v and of gate|up each take one activation form (stacked, or of types whose
// forms agree): each stage writes its consumer's form.
bool fused_decode_for(const WeightsLayout& W) {
  auto one_form = [](std::initializer_list<const DevMatrix*> parts, const DevMatrix& stacked) {
    if (stacked.q) return true;
    for (const DevMatrix* m : parts)
      if (act_form(m->type) != act_form((*parts.begin())->type)) return false;
    return true;
  };
  for (const DevLayer& L : W.layers)
    if (!one_form({&L.wq, &L.wk, &L.wv}, L.qkv) || !one_form({&L.gate, &L.up}, L.gate_up))
      return false;
  return true;
}

bool enqueue_model(const CudaWeights& weights, const ForwardBufs& b, const int32_t* tokens, int n,
                   int n_out, cudaStream_t cs, const AttendFn& attend) {
  const ModelHparams& hp = weights.model().hparams();
  const WeightsLayout& W = weights.impl().w;
  const int64_t E = hp.n_embd, F = hp.n_ff;
  float* x = b.x;
  float* xn = b.xn;
  float* proj = b.proj;
  void* act = b.act;
  const bool fuse = n == 1 && fused_decode() && fused_decode_for(W);

  // y[:, at..] = x . W^T for each matrix of a group (fused when the upload fused it).
  auto product = [&](const float* in, int64_t cols, std::initializer_list<const DevMatrix*> parts,
                     const DevMatrix& fused, float* y, int64_t ldy) {
    if (fused.q) {
      convert_act(fused.type, in, n, cols, cols, act, cs);
      matmul(fused, act, n, y, ldy, cs);
      return;
    }
    int64_t at = 0;
    for (const DevMatrix* m : parts) {
      convert_act(m->type, in, n, cols, cols, act, cs);
      matmul(*m, act, n, y + at, ldy, cs);
      at += m->rows;
    }
  };

  // Fused: y = act . W^T for each part of a group that takes act as it is.
  auto product_of_act = [&](std::initializer_list<const DevMatrix*> parts, const DevMatrix& stacked,
                            float* y, int64_t ldy) {
    if (stacked.q) {
      matmul(stacked, act, 1, y, ldy, cs);
      return;
    }
    int64_t at = 0;
    for (const DevMatrix* m : parts) {
      matmul(*m, act, 1, y + at, ldy, cs);
      at += m->rows;
    }
  };

  embed(W.token_embd, tokens, n, hp.embd_scale, x, cs);
  if (fuse)
    norm_quant(nullptr, nullptr, x, W.layers.front().attn_norm, 1, E, hp.rms_eps,
               W.layers.front().wq.type, act, cs);
  for (int il = 0; il < hp.n_layer; ++il) {
    const DevLayer& L = W.layers[static_cast<size_t>(il)];
    if (fuse) {
      product_of_act({&L.wq, &L.wk, &L.wv}, L.qkv, b.qkv, b.qkv_w);
    } else {
      rms_norm(x, E, L.attn_norm, n, E, hp.rms_eps, xn, E, cs);
      product(xn, E, {&L.wq, &L.wk, &L.wv}, L.qkv, b.qkv, b.qkv_w);
    }
    // Fused: the attention's merge writes W_o's input itself (Q8_0 blocks; every form with
    // attention_writes_every_form).
    const ActForm wo_form = act_form(L.wo.type);
    const bool wo_from_attention =
        fuse && (wo_form == ActForm::q8 || attention_writes_every_form());
    if (attend(il, wo_from_attention ? act : nullptr, wo_form))
      matmul(L.wo, act, 1, proj, E, cs);
    else
      product(b.attn, b.attn_w, {&L.wo}, DevMatrix{}, proj, E);
    if (fuse) {  // the residual add, the FFN norm and the product's input in one kernel
      norm_quant(proj, hp.has_post_norms ? L.post_attn_norm : nullptr, x, L.ffn_norm, 1, E,
                 hp.rms_eps, L.gate.type, act, cs);
      product_of_act({&L.gate, &L.up}, L.gate_up, b.gu, 2 * F);
      glu_quant(b.gu, 2 * F, 1, F, hp.gelu_ffn, L.down.type, act, cs);
      matmul(L.down, act, 1, proj, E, cs);
      const bool last = il + 1 == hp.n_layer;
      norm_quant(proj, hp.has_post_norms ? L.post_ffw_norm : nullptr, x,
                 last ? W.output_norm : W.layers[static_cast<size_t>(il) + 1].attn_norm, 1, E,
                 hp.rms_eps, last ? W.output.type : W.layers[static_cast<size_t>(il) + 1].wq.type,
                 act, cs);
      continue;
    }
    add_normed(proj, hp.has_post_norms ? L.post_attn_norm : nullptr, n, E, hp.rms_eps, x, cs);

    rms_norm(x, E, L.ffn_norm, n, E, hp.rms_eps, xn, E, cs);
    product(xn, E, {&L.gate, &L.up}, L.gate_up, b.gu, 2 * F);
    glu(b.gu, 2 * F, n, F, hp.gelu_ffn, b.ff, cs);
    product(b.ff, F, {&L.down}, DevMatrix{}, proj, E);
    add_normed(proj, hp.has_post_norms ? L.post_ffw_norm : nullptr, n, E, hp.rms_eps, x, cs);
  }
  if (n_out <= 0) return false;
  const int first = n - n_out;
  if (!fuse) {  // fused: the last layer's norm_quant left the output norm's input in act
    rms_norm(x + first * E, E, W.output_norm, n_out, E, hp.rms_eps, xn, E, cs);
    convert_act(W.output.type, xn, n_out, E, E, act, cs);
  }
  // A softcap changes the logits after the product: the product's own stores are not them.
  if (n_out == 1 && b.logits_host && host_logits() && !(hp.final_logit_softcap > 0) &&
      matmul_logits_to_host(W.output, act, b.logits, b.logits_host, b.logits_bad, cs))
    return true;
  matmul(W.output, act, n_out, b.logits, hp.n_vocab, cs);
  if (hp.final_logit_softcap > 0)
    softcap(b.logits, static_cast<int64_t>(n_out) * hp.n_vocab, hp.final_logit_softcap, cs);
  if (b.nonfinite)
    nonfinite_flags(b.logits, static_cast<int64_t>(n_out) * hp.n_vocab, b.nonfinite, cs);
  return false;
}

}  // namespace channel::cuda
