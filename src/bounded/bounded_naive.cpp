// bounded_attention_naive: absolute RoPE + masked softmax, all in f64.
#include "bounded/bounded_naive.h"

#include <cmath>
#include <vector>

namespace channel {

namespace {

// NEOX rotation of the first rd dims of x by angle pos · inv_freq[i]; the rest copied.
std::vector<double> rope_abs(const float* x, int hd, int rd, double base, uint64_t pos) {
  std::vector<double> r(x, x + hd);
  const int half = rd / 2;
  for (int i = 0; i < half; ++i) {
    const double angle = static_cast<double>(pos) * std::pow(base, -2.0 * i / rd);
    const double c = std::cos(angle), s = std::sin(angle);
    const double x0 = x[i], x1 = x[i + half];
    r[i] = x0 * c - x1 * s;
    r[i + half] = x0 * s + x1 * c;
  }
  return r;
}

}  // namespace

void bounded_attention_naive(const BoundedAttnCfg& c, double base, const float* sink_k,
                             const float* sink_v, const float* q, const float* k, const float* v,
                             int64_t n_tokens, uint64_t pos0, float* out) {
  const int hd = c.head_dim, nh = c.n_heads, kvh = c.n_kv_heads, S = c.n_sinks;
  const int group = nh / kvh;
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int h = 0; h < nh; ++h) {
      const int g = h / group;
      const float* qt = q + (t * nh + h) * hd;
      const std::vector<double> qr = rope_abs(qt, hd, c.rope_dims, base, pos0 + t);
      std::vector<double> score;  // sinks, then every key j ≤ t, masked out of the window
      std::vector<const float*> vals;
      for (int s = 0; s < S; ++s) {
        const float* ks = sink_k + (static_cast<int64_t>(g) * S + s) * hd;
        double d = 0;
        for (int i = 0; i < hd; ++i) d += static_cast<double>(qt[i]) * ks[i];  // NoPE
        score.push_back(d * c.attn_scale);
        vals.push_back(sink_v + (static_cast<int64_t>(g) * S + s) * hd);
      }
      for (int64_t j = 0; j <= t; ++j) {
        if (j <= t - c.window) continue;  // window mask: j ∈ (t − W, t]
        const std::vector<double> kr =
            rope_abs(k + (j * kvh + g) * hd, hd, c.rope_dims, base, pos0 + j);
        double d = 0;
        for (int i = 0; i < hd; ++i) d += qr[i] * kr[i];
        score.push_back(d * c.attn_scale);
        vals.push_back(v + (j * kvh + g) * hd);
      }
      double mx = -INFINITY, sum = 0;
      for (double s : score) mx = std::max(mx, s);
      for (double& s : score) sum += (s = std::exp(s - mx));
      for (int i = 0; i < hd; ++i) {
        double acc = 0;
        for (size_t m = 0; m < score.size(); ++m) acc += score[m] * vals[m][i];
        out[(t * nh + h) * hd + i] = static_cast<float>(acc / sum);
      }
    }
  }
}

}  // namespace channel
