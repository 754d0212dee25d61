// bounded_attention(_batch): projections (chunk matmuls), q/k norms, the core, W_o.
#include "bounded/bounded_attention.h"

#include <algorithm>
#include <cmath>

#include "backend/cpu/matmul.h"
#include "util/error.h"

namespace channel {

namespace {

// Per-head RMS norm in place: sum of squares in double, scale in float (llama.cpp's rule).
void rms_norm_heads(float* x, int64_t n_rows, int hd, const float* w, float eps) {
  for (int64_t r = 0; r < n_rows; ++r) {
    float* row = x + r * hd;
    double sum = 0.0;
    for (int i = 0; i < hd; ++i) sum += static_cast<double>(row[i] * row[i]);
    const float scale = 1.0f / std::sqrt(static_cast<float>(sum / hd) + eps);
    for (int i = 0; i < hd; ++i) row[i] = (row[i] * scale) * w[i];
  }
}

void check_matrix(const WeightMatrix& m, int64_t rows, int64_t cols, const char* name) {
  if (m.rows != rows || m.cols != cols) {
    throw_error("bounded attention: {} is [{} x {}], expected [{} x {}]", name, m.rows, m.cols,
                rows, cols);
  }
}

}  // namespace

BoundedScratch::BoundedScratch(const BoundedAttnCfg& c, int max_batch_)
    : max_batch(std::max(1, max_batch_)),
      q(static_cast<size_t>(max_batch) * c.n_heads * c.head_dim),
      k(static_cast<size_t>(max_batch) * c.n_kv_heads * c.head_dim),
      v(k.size()),
      attn(q.size()) {}

void check_bounded_weights(const BoundedAttnCfg& c, const BoundedWeights& w, int64_t n_embd) {
  const int64_t q_dim = int64_t{c.n_heads} * c.head_dim,
                kv_dim = int64_t{c.n_kv_heads} * c.head_dim;
  check_matrix(w.wq, q_dim, n_embd, "attn_q");
  check_matrix(w.wk, kv_dim, n_embd, "attn_k");
  check_matrix(w.wv, kv_dim, n_embd, "attn_v");
  check_matrix(w.wo, n_embd, q_dim, "attn_output");
  if (w.q_norm == nullptr || w.k_norm == nullptr) {
    throw_error("bounded attention: attn_q_norm / attn_k_norm missing");
  }
  if (c.n_sinks > 0 && (w.sink_k == nullptr || w.sink_v == nullptr)) {
    throw_error("bounded attention: {} sinks declared but no sink tensors", c.n_sinks);
  }
}

void bounded_attention(const BoundedAttnCfg& c, const BoundedWeights& w, BoundedState& state,
                       const float* x, float* y, BoundedScratch& scratch, ThreadPool& pool) {
  bounded_attention_batch(c, w, state, x, 1, y, scratch, pool);
}

void bounded_attention_batch(const BoundedAttnCfg& c, const BoundedWeights& w, BoundedState& state,
                             const float* x, int64_t n, float* y, BoundedScratch& s,
                             ThreadPool& pool) {
  const int64_t n_embd = w.wq.cols;
  for (int64_t i0 = 0; i0 < n; i0 += s.max_batch) {
    const int64_t b = std::min<int64_t>(s.max_batch, n - i0);
    const float* xb = x + i0 * n_embd;      // [b][n_embd]
    matmul(w.wq, xb, b, s.q.data(), pool);  // [b][n_heads][hd]
    matmul(w.wk, xb, b, s.k.data(), pool);  // [b][n_kv_heads][hd]
    matmul(w.wv, xb, b, s.v.data(), pool);  // [b][n_kv_heads][hd]
    rms_norm_heads(s.q.data(), b * c.n_heads, c.head_dim, w.q_norm, c.norm_eps);
    rms_norm_heads(s.k.data(), b * c.n_kv_heads, c.head_dim, w.k_norm, c.norm_eps);
    bounded_attend(c, w.sink_k, w.sink_v, state, s.q.data(), s.k.data(), s.v.data(), b,
                   s.attn.data(), &pool);
    matmul(w.wo, s.attn.data(), b, y + i0 * n_embd, pool);  // [b][n_embd]
  }
}

}  // namespace channel
