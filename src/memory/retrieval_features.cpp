// Representative keys and projected vectors of a staged episode.
#include "memory/retrieval_features.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "util/error.h"

namespace channel {

std::vector<float> representative_keys(const RetrievalFeatureConfig& c, const StagedEpisode& e) {
  const size_t n = e.size(), L = c.num_layers, H = c.n_kv_heads, G = c.group, D = c.head_dim;
  const size_t R = c.keys_per_head, kv_dim = H * D, q_dim = H * G * D;
  if (n == 0 || e.kv.size() != n * L * 2 * kv_dim)
    throw_error("retrieval: staged K/V of {} values for {} tokens x {} layers x 2 x {}",
                e.kv.size(), n, L, kv_dim);
  const bool have_q = !e.queries.empty();
  if (have_q && e.queries.size() != n * L * q_dim)
    throw_error("retrieval: staged queries of {} values for {} tokens x {} layers x {}",
                e.queries.size(), n, L, q_dim);
  std::vector<float> out(L * H * R * D);
  std::vector<float> raw(n * D);         // [j][D] one head's un-rotated keys
  std::vector<float> qrot(G * n * D);    // [g][i][D] the group's queries at their clocks
  std::vector<float> weight(n), logits(n);
  std::vector<size_t> order(n);
  for (size_t l = 0; l < L; ++l) {
    for (size_t h = 0; h < H; ++h) {
      for (size_t j = 0; j < n; ++j) {
        const float* k = e.kv.data() + (j * L + l) * 2 * kv_dim + h * D;  // staging order
        rope_rotate_at(c.rope, -static_cast<double>(e.start_clock + j), k, raw.data() + j * D, 1,
                       static_cast<uint32_t>(D));
      }
      std::fill(weight.begin(), weight.end(), 0.0f);
      if (have_q) {
        for (size_t g = 0; g < G; ++g)
          for (size_t i = 0; i < n; ++i) {
            const float* q = e.queries.data() + (i * L + l) * q_dim + (h * G + g) * D;
            rope_rotate_at(c.rope, static_cast<double>(e.start_clock + i), q,
                           qrot.data() + (g * n + i) * D, 1, static_cast<uint32_t>(D));
          }
        for (size_t g = 0; g < G; ++g)
          for (size_t i = 0; i < n; ++i) {
            // Scores against the un-rotated keys re-rotated at their clocks: R(i)q . R(j)k.
            const float* q = qrot.data() + (g * n + i) * D;
            float mx = -INFINITY;
            for (size_t j = 0; j <= i; ++j) {
              const float* kr = e.kv.data() + (j * L + l) * 2 * kv_dim + h * D;
              float s = 0.0f;
              for (size_t d = 0; d < D; ++d) s += q[d] * kr[d];
              logits[j] = s * c.attn_scale;
              mx = std::max(mx, logits[j]);
            }
            double sum = 0.0;
            for (size_t j = 0; j <= i; ++j) sum += std::exp(static_cast<double>(logits[j] - mx));
            for (size_t j = 0; j <= i; ++j)
              weight[j] += static_cast<float>(std::exp(static_cast<double>(logits[j] - mx)) / sum);
          }
      } else {
        for (size_t j = 0; j < n; ++j) {
          double s = 0.0;
          for (size_t d = 0; d < D; ++d) s += double{raw[j * D + d]} * raw[j * D + d];
          weight[j] = static_cast<float>(std::sqrt(s));
        }
      }
      // The mean over the queries that can see j, not the sum: a causal softmax inside the
      // episode gives its first tokens most of the mass only because they are first.
      if (have_q)
        for (size_t j = 0; j < n; ++j) weight[j] /= static_cast<float>(G * (n - j));
      std::iota(order.begin(), order.end(), size_t{0});
      std::stable_sort(order.begin(), order.end(),
                       [&](size_t a, size_t b) { return weight[a] > weight[b]; });
      const size_t kept = std::min(n, R);
      for (size_t r = 0; r < R; ++r) {
        const size_t j = order[r % kept];
        std::copy_n(raw.data() + j * D, D, out.data() + ((l * H + h) * R + r) * D);
      }
    }
  }
  return out;
}

std::vector<float> projected_tokens(const RetrievalHead& head, const StagedEpisode& e) {
  const size_t n = e.size();
  if (e.hidden.size() != n * head.n_embd)
    throw_error("retrieval: staged hidden states of {} values for {} tokens x {}", e.hidden.size(),
                n, head.n_embd);
  std::vector<float> out(n * head.dim);
  for (size_t t = 0; t < n; ++t)
    head.project_key(e.hidden.data() + t * head.n_embd, out.data() + t * head.dim);
  return out;
}

}  // namespace channel
