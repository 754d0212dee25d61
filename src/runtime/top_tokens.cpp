#include "runtime/top_tokens.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace channel {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// 16 lanes a step as one vector (GCC/Clang vector extensions: one AVX-512 register, or two or
// four narrower ones); `v > m ? v : m` passes over NaN, as the scalar compare did.
constexpr size_t kLanes = 16;
typedef float Floats __attribute__((vector_size(kLanes * sizeof(float))));
typedef int32_t Ints __attribute__((vector_size(kLanes * sizeof(int32_t))));

Floats load(const float* x) {
  Floats v;
  std::memcpy(&v, x, sizeof v);
  return v;
}

Floats splat(float f) {
  return Floats{} + f;
}

// The largest of x[0, n) (n a multiple of kLanes), NaN passed over; -inf if none is above.
float lane_max(const float* x, size_t n) {
  Floats m = splat(kNegInf);
  for (size_t i = 0; i < n; i += kLanes) {
    const Floats v = load(x + i);
    m = v > m ? v : m;
  }
  float best = kNegInf;
  for (size_t j = 0; j < kLanes; ++j) best = m[j] > best ? m[j] : best;
  return best;
}

// The largest logit of the row, NaN passed over; -inf if none is above.
float row_max(std::span<const float> logits) {
  const size_t body = logits.size() / kLanes * kLanes;
  float best = lane_max(logits.data(), body);
  for (size_t i = body; i < logits.size(); ++i) best = logits[i] > best ? logits[i] : best;
  return best;
}

}  // namespace

size_t argmax_logit(std::span<const float> logits) {
  const float* x = logits.data();
  const size_t n = logits.size(), body = n / kLanes * kLanes;
  // Each lane keeps its first maximum (strictly greater replaces).
  Floats m = splat(kNegInf);
  Ints at{}, id{};
  for (size_t j = 0; j < kLanes; ++j) id[j] = static_cast<int32_t>(j);
  for (size_t i = 0; i < body; i += kLanes, id += static_cast<int32_t>(kLanes)) {
    const Floats v = load(x + i);
    const Ints greater = v > m;
    m = greater ? v : m;
    at = greater ? id : at;
  }
  float best = kNegInf;
  size_t best_at = 0;
  for (size_t j = 0; j < kLanes; ++j)
    if (m[j] > best || (m[j] == best && m[j] > kNegInf && static_cast<size_t>(at[j]) < best_at)) {
      best = m[j];
      best_at = static_cast<size_t>(at[j]);
    }
  for (size_t i = body; i < n; ++i)  // the tail's ids are above every lane's
    if (x[i] > best) {
      best = x[i];
      best_at = i;
    }
  return best > kNegInf ? best_at : 0;
}

void top_k_tokens(std::span<const float> logits, size_t k, std::vector<TokenCandidate>& out) {
  out.clear();
  const size_t n = logits.size();
  k = std::min(k, n);
  if (k == 0) return;
  out.reserve(k);
  auto clean = [&](size_t i) {
    const float v = logits[i];
    return std::isnan(v) ? kNegInf : v;
  };
  // A heap whose top is the worst kept (the last by ranks_before).
  size_t i = 0;
  for (; i < k; ++i) {
    out.push_back({static_cast<int32_t>(i), clean(i), 0.0f});
    std::push_heap(out.begin(), out.end(), ranks_before);
  }
  // Ids only grow from here, so a logit equal to the worst kept loses its tie: only a
  // greater one enters, and a block or a group of lanes whose largest is not greater is
  // passed over whole (after the first few thousand logits, nearly all of them).
  constexpr size_t kBlock = 16 * kLanes;
  float worst = out.front().logit;
  auto scan = [&](size_t from, size_t to) {
    for (size_t j = from; j < to; ++j) {
      const float v = clean(j);
      if (!(v > worst)) continue;
      std::pop_heap(out.begin(), out.end(), ranks_before);
      out.back() = {static_cast<int32_t>(j), v, 0.0f};
      std::push_heap(out.begin(), out.end(), ranks_before);
      worst = out.front().logit;
    }
  };
  for (; i + kBlock <= n; i += kBlock) {
    if (!(lane_max(logits.data() + i, kBlock) > worst)) continue;
    for (size_t g = i; g < i + kBlock; g += kLanes)
      if (lane_max(logits.data() + g, kLanes) > worst) scan(g, g + kLanes);
  }
  scan(i, n);
  std::sort(out.begin(), out.end(), ranks_before);
}

bool nucleus_tokens(std::span<const float> logits, float top_p, float min_p,
                    std::vector<TokenCandidate>& out, bool& sorted) {
  const size_t n = logits.size();
  if (!(min_p > 0.0f) || n < 2) return false;
  const float max_logit = row_max(logits);
  if (!std::isfinite(max_logit)) return false;
  // apply_min_p's threshold: the maximum survives top-p, so it is the row's.
  const float threshold = max_logit + std::log(min_p);
  out.clear();
  constexpr size_t kBlock = 16 * kLanes;
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {  // blocks with nothing at the threshold passed over
    if (!(lane_max(logits.data() + i, kBlock) >= threshold)) continue;
    for (size_t j = i; j < i + kBlock; ++j)
      if (logits[j] >= threshold) out.push_back({static_cast<int32_t>(j), logits[j], 0.0f});
  }
  for (; i < n; ++i)
    if (logits[i] >= threshold) out.push_back({static_cast<int32_t>(i), logits[i], 0.0f});
  sorted = false;
  if (top_p >= 1.0f) return true;  // top-p off: min-p's erase keeps the row's (id) order
  // apply_top_p's softmax: each exp rounded to float, summed in double in id order over the
  // whole row (NaN and -inf give 0), each probability that over the sum rounded to float.
  double sum = 0.0;
  for (size_t j = 0; j < n; ++j) {
    const float v = logits[j];
    if (!(v > kNegInf)) continue;  // NaN (taken as -inf) and -inf: exp gives 0
    const float e = std::exp(v - max_logit);
    sum += e;
  }
  std::sort(out.begin(), out.end(), ranks_before);
  sorted = true;
  // The smallest prefix with mass >= top_p; past the listed tokens min-p cuts it anyway.
  double cum = 0.0;
  for (size_t j = 0; j < out.size(); ++j) {
    const float e = std::exp(out[j].logit - max_logit);
    out[j].p = static_cast<float>(e / sum);
    cum += out[j].p;
    if (cum >= top_p) {
      out.resize(j + 1);
      break;
    }
  }
  return true;
}

StepLogprobs step_logprobs(std::span<const float> logits, int32_t token, size_t top_n) {
  StepLogprobs out;
  const float max_logit = row_max(logits);
  double sum = 0.0;
  if (std::isfinite(max_logit))
    for (const float v : logits)
      if (v > kNegInf) sum += std::exp(v - max_logit);  // float exps, a double sum
  // log-sum-exp: every log-probability is the logit less this.
  const double lse = std::isfinite(max_logit) ? max_logit + std::log(sum) : HUGE_VAL;
  auto logprob = [&](float v) {
    return std::isnan(v) || !std::isfinite(lse) ? kNegInf : static_cast<float>(v - lse);
  };
  out.logprob = token >= 0 && static_cast<size_t>(token) < logits.size()
                    ? logprob(logits[static_cast<size_t>(token)])
                    : kNegInf;
  if (top_n > 0) {
    std::vector<TokenCandidate> best;
    top_k_tokens(logits, top_n, best);
    for (const TokenCandidate& c : best) out.top.emplace_back(c.id, logprob(c.logit));
  }
  return out;
}

}  // namespace channel
