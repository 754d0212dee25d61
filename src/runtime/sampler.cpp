#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/top_tokens.h"
#include "util/error.h"
#include "util/hash.h"

namespace channel {

namespace {

uint64_t rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

// Fills p with the softmax of the logits, subtracting the maximum first. An all -inf list gets all
// its mass on the first entry.
void softmax(CandidateList& c) {
  float max_logit = -std::numeric_limits<float>::infinity();
  for (const auto& t : c.items) max_logit = std::max(max_logit, t.logit);
  if (max_logit == -std::numeric_limits<float>::infinity()) {
    for (auto& t : c.items) t.p = 0.0f;
    c.items.front().p = 1.0f;
    return;
  }
  double sum = 0.0;
  for (auto& t : c.items) {
    t.p = std::exp(t.logit - max_logit);
    sum += t.p;
  }
  for (auto& t : c.items) t.p = static_cast<float>(t.p / sum);
}

}  // namespace

Rng::Rng(uint64_t seed) {
  for (auto& s : s_) s = splitmix64(seed);
}

uint64_t Rng::next_u64() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

void Rng::set_state(const std::array<uint64_t, 4>& state) {
  if (state[0] == 0 && state[1] == 0 && state[2] == 0 && state[3] == 0)
    throw_error("sampler: the all-zero RNG state is invalid");
  for (int i = 0; i < 4; ++i) s_[i] = state[i];
}

double Rng::next_double() {
  return static_cast<double>(next_u64() >> 11) * 0x1.0p-53;
}

void validate(const SamplerConfig& config) {
  if (!(config.temperature >= 0.0f) || !std::isfinite(config.temperature))
    throw_error("sampler: temperature must be a finite number >= 0, got {}", config.temperature);
  if (!(config.top_p >= 0.0f && config.top_p <= 1.0f))
    throw_error("sampler: top-p must be in [0, 1], got {}", config.top_p);
  if (!(config.min_p >= 0.0f && config.min_p <= 1.0f))
    throw_error("sampler: min-p must be in [0, 1], got {}", config.min_p);
  if (!(config.repeat_penalty > 0.0f) || !std::isfinite(config.repeat_penalty))
    throw_error("sampler: repeat penalty must be a finite number > 0, got {}",
                config.repeat_penalty);
  if (config.repeat_last_n < 0)
    throw_error("sampler: repeat-last-n must be >= 0, got {}", config.repeat_last_n);
  if (!std::isfinite(config.presence_penalty) || !std::isfinite(config.frequency_penalty))
    throw_error("sampler: presence and frequency penalties must be finite, got {} and {}",
                config.presence_penalty, config.frequency_penalty);
  for (const LogitEdit& e : config.logit_bias)
    if (!std::isfinite(e.delta))
      throw_error("sampler: the logit bias of token {} must be finite, got {}", e.id, e.delta);
}

void CandidateList::assign(std::span<const float> logits) {
  items.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    const float l = std::isnan(logits[i]) ? -std::numeric_limits<float>::infinity() : logits[i];
    items[i] = {static_cast<int32_t>(i), l, 0.0f};
  }
  sorted = false;
}

void apply_repeat_penalty(CandidateList& c, std::span<const int32_t> recent, float penalty) {
  if (penalty == 1.0f || recent.empty()) return;
  // Each distinct recent token is penalised once, however often it occurred.
  std::vector<int32_t> ids(recent.begin(), recent.end());
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  for (auto& t : c.items) {
    if (!std::binary_search(ids.begin(), ids.end(), t.id)) continue;
    t.logit = t.logit <= 0.0f ? t.logit * penalty : t.logit / penalty;
  }
  c.sorted = false;
}

void apply_top_k(CandidateList& c, int32_t k) {
  if (k <= 0) return;
  const size_t keep = std::min(static_cast<size_t>(k), c.items.size());
  if (!c.sorted) {
    std::partial_sort(c.items.begin(), c.items.begin() + keep, c.items.end(), ranks_before);
    c.sorted = true;
  }
  c.items.resize(keep);
}

void apply_top_p(CandidateList& c, float p) {
  if (p >= 1.0f || c.items.size() <= 1) return;
  softmax(c);
  // Sorting a whole 256K vocabulary is slow, and the mass is usually in the first few
  // hundred: sort those first, and where they do not reach p the next eight times as many
  // (selected, then sorted), and so on. The order is total, so the prefix is the full sort's.
  size_t n_sorted = c.sorted ? c.items.size() : 0;
  double cum = 0.0;
  size_t keep = c.items.size();
  for (size_t i = 0; i < c.items.size(); ++i) {
    if (i == n_sorted) {
      const size_t next = std::min(c.items.size(), std::max<size_t>(256, 8 * n_sorted));
      const auto from = c.items.begin() + static_cast<std::ptrdiff_t>(i);
      const auto to = c.items.begin() + static_cast<std::ptrdiff_t>(next);
      if (next < c.items.size()) std::nth_element(from, to, c.items.end(), ranks_before);
      std::sort(from, to, ranks_before);
      n_sorted = next;
    }
    cum += c.items[i].p;
    if (cum >= p) {
      keep = i + 1;
      break;
    }
  }
  c.items.resize(keep);
  c.sorted = true;
}

void apply_min_p(CandidateList& c, float min_p) {
  if (min_p <= 0.0f || c.items.size() <= 1) return;
  float max_logit = -std::numeric_limits<float>::infinity();
  for (const auto& t : c.items) max_logit = std::max(max_logit, t.logit);
  // p_i >= min_p * p_max  <=>  logit_i >= max_logit + log(min_p)
  const float threshold = max_logit + std::log(min_p);
  // Stable removal keeps a sorted list sorted; the maximum always survives (log(min_p) <= 0).
  std::erase_if(c.items, [&](const TokenCandidate& t) { return t.logit < threshold; });
}

void apply_temperature(CandidateList& c, float temperature) {
  if (temperature <= 0.0f) {
    const auto best = std::min_element(c.items.begin(), c.items.end(), ranks_before);
    const TokenCandidate top = *best;
    c.items.assign(1, top);
    c.sorted = true;
    return;
  }
  for (auto& t : c.items) t.logit /= temperature;
}

int32_t draw(CandidateList& c, Rng& rng) {
  if (c.items.empty()) throw_error("sampler: no candidates to draw from");
  softmax(c);
  double total = 0.0;
  for (const auto& t : c.items) total += t.p;
  const double target = rng.next_double() * total;
  double cum = 0.0;
  for (const auto& t : c.items) {
    cum += t.p;
    if (cum > target) return t.id;
  }
  // Rounding left the target unreached: take the last candidate with any mass.
  for (auto it = c.items.rbegin(); it != c.items.rend(); ++it) {
    if (it->p > 0.0f) return it->id;
  }
  return c.items.front().id;
}

Sampler::Sampler(const SamplerConfig& config) : config_(config), rng_(config.seed) {
  validate(config_);
  history_.reserve(static_cast<size_t>(config_.repeat_last_n));
}

void Sampler::accept(int32_t token) {
  if (config_.repeat_last_n == 0) return;
  if (history_.size() < static_cast<size_t>(config_.repeat_last_n)) {
    history_.push_back(token);
    return;
  }
  history_[history_next_] = token;
  history_next_ = (history_next_ + 1) % history_.size();
}

std::vector<int32_t> Sampler::recent_tokens() const {
  std::vector<int32_t> out;
  out.reserve(history_.size());
  for (size_t i = 0; i < history_.size(); ++i)
    out.push_back(history_[(history_next_ + i) % history_.size()]);
  return out;
}

void Sampler::restore(const std::array<uint64_t, 4>& rng_state, std::span<const int32_t> recent) {
  if (recent.size() > static_cast<size_t>(config_.repeat_last_n))
    throw_error("sampler: {} recent tokens, more than repeat_last_n ({})", recent.size(),
                config_.repeat_last_n);
  Rng rng = rng_;
  rng.set_state(rng_state);
  rng_ = rng;
  history_.assign(recent.begin(), recent.end());  // oldest first: the next token overwrites [0]
  history_next_ = 0;
}

Sampler Sampler::reconfigured(const SamplerConfig& config) const {
  Sampler out(config);
  std::vector<int32_t> recent = recent_tokens();
  const size_t keep =
      std::min(recent.size(), static_cast<size_t>(std::max(0, config.repeat_last_n)));
  recent.erase(recent.begin(), recent.end() - static_cast<std::ptrdiff_t>(keep));
  out.restore(config.seed == config_.seed ? rng_.state() : out.rng_.state(), recent);
  out.bias_ = bias_;
  return out;
}

void Sampler::reset() {
  history_.clear();
  history_next_ = 0;
  rng_ = Rng(config_.seed);
}

std::span<const float> Sampler::penalized(std::span<const float> logits) {
  const bool counted = config_.presence_penalty != 0.0f || config_.frequency_penalty != 0.0f;
  if ((config_.repeat_penalty == 1.0f && !counted) || history_.empty()) return logits;
  scratch_.assign(logits.begin(), logits.end());
  // Each distinct recent token once, with how often it occurred.
  seen_.assign(history_.begin(), history_.end());
  std::sort(seen_.begin(), seen_.end());
  for (size_t i = 0; i < seen_.size();) {
    size_t j = i;
    while (j < seen_.size() && seen_[j] == seen_[i]) ++j;
    const int32_t id = seen_[i];
    const float count = static_cast<float>(j - i);
    i = j;
    if (id < 0 || static_cast<size_t>(id) >= scratch_.size()) continue;
    float l = logits[static_cast<size_t>(id)];
    if (config_.repeat_penalty != 1.0f)
      l = l <= 0.0f ? l * config_.repeat_penalty : l / config_.repeat_penalty;
    if (counted) l -= count * config_.frequency_penalty + config_.presence_penalty;
    scratch_[static_cast<size_t>(id)] = l;
  }
  return scratch_;
}

int32_t Sampler::sample_greedy(std::span<const float> logits) {
  // Every filter keeps the maximum, so greedy is the argmax of the penalised logits
  // (ties to the lowest id), without building the candidate list.
  return static_cast<int32_t>(argmax_logit(penalized(logits)));
}

int32_t Sampler::sample(std::span<const float> logits) {
  if (logits.empty()) throw_error("sampler: empty logits");
  if (bias_ || !config_.logit_bias.empty()) {
    edits_.assign(config_.logit_bias.begin(), config_.logit_bias.end());
    if (bias_) bias_(logits.size(), edits_);
    if (!edits_.empty()) {
      biased_.assign(logits.begin(), logits.end());
      for (const LogitEdit& e : edits_)
        if (e.id >= 0 && static_cast<size_t>(e.id) < biased_.size())
          biased_[static_cast<size_t>(e.id)] += e.delta;
      logits = biased_;
    }
  }
  if (config_.temperature <= 0.0f) return sample_greedy(logits);
  const std::span<const float> values = penalized(logits);
  if (config_.top_k > 0 && static_cast<size_t>(config_.top_k) < values.size()) {
    // What assign + apply_top_k give, without the whole vocabulary's list.
    top_k_tokens(values, static_cast<size_t>(config_.top_k), candidates_.items);
    candidates_.sorted = true;
    apply_top_p(candidates_, config_.top_p);
  } else if (config_.top_k > 0 || !nucleus_tokens(values, config_.top_p, config_.min_p,
                                                  candidates_.items, candidates_.sorted)) {
    candidates_.assign(values);
    apply_top_k(candidates_, config_.top_k);
    apply_top_p(candidates_, config_.top_p);
  }  // else top-p and min-p of the whole row without its list (nucleus_tokens)
  apply_min_p(candidates_, config_.min_p);
  apply_temperature(candidates_, config_.temperature);
  return draw(candidates_, rng_);
}

}  // namespace channel
