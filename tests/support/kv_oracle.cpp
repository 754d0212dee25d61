// The reference timeline and attention (see oracle.h): scans over every token, no rings.
#include "support/kv_oracle.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace channel {

OracleTimeline::OracleTimeline(const RingConfig& config) : config_(config) {}

void OracleTimeline::begin_span(SpanType type) {
  pending_ = type;
}

uint64_t OracleTimeline::live_window() const {
  uint64_t n = 0;
  for (uint64_t c = 0; c < tokens_.size(); ++c) n += is_window(c) && tokens_[c].live;
  return n;
}

void OracleTimeline::evict_oldest(bool allow_cut) {
  uint64_t first = n_sys_;
  while (first < tokens_.size() && !tokens_[first].live) ++first;
  if (first == tokens_.size()) throw_error("oracle: nothing to evict");
  const Token& t = tokens_[first];
  const uint64_t window_size = config_.n_slots - config_.n_recall - n_sys_;
  const uint64_t capacity = window_size - config_.probe_reserve;
  const uint64_t chunk = std::clamp<uint64_t>(config_.cut_chunk ? config_.cut_chunk : capacity / 8,
                                              1, std::max<uint64_t>(capacity, 1));
  const bool cut = allow_cut && open_ && t.span_seq == seq_;
  uint64_t span_live = 0;
  for (const Token& u : tokens_) span_live += u.live && u.span_seq == t.span_seq;
  const uint64_t n = cut ? std::min(chunk, span_live) : span_live;
  const SpanType type = t.type;
  uint64_t evicted = 0;
  for (uint64_t c = first; c < tokens_.size() && evicted < n; ++c)
    if (tokens_[c].live && tokens_[c].span_seq == t.span_seq) {
      tokens_[c].live = false;
      ++evicted;
    }
  const auto slot = static_cast<uint32_t>(n_sys_ + (first - n_sys_) % window_size);
  evictions_.push_back({type, first, first + n, slot, static_cast<uint32_t>(n)});
  if (cut && n == span_live) {  // the open span went whole: its type continues
    pending_ = type;
    open_ = false;
  }
}

void OracleTimeline::append_token() {
  if (!pending_ && !open_) throw_error("oracle: no span begun");
  if (sealed_) {
    const uint64_t window_size = config_.n_slots - config_.n_recall - n_sys_;
    if (probe_) {
      if (live_window() >= window_size) throw_error("oracle: probe longer than the free window");
    } else {
      while (live_window() >= window_size - config_.probe_reserve) evict_oldest(!pending_);
    }
  }
  if (pending_) {
    ++seq_;
    tokens_.push_back({seq_, *pending_, true});
    pending_.reset();
    open_ = true;
  } else {
    tokens_.push_back({seq_, tokens_.back().type, true});
  }
}

void OracleTimeline::seal() {
  sealed_ = true;
  n_sys_ = tokens_.size();
  open_ = false;
}

void OracleTimeline::evict_oldest_span() {
  evict_oldest(false);
}

void OracleTimeline::activate_recall(uint64_t id, uint32_t n_tokens, uint64_t stored_pos) {
  episodes_.push_back({id, n_tokens, stored_pos});
}

void OracleTimeline::deactivate_recall(uint64_t id) {
  std::erase_if(episodes_, [&](const Episode& e) { return e.id == id; });
}

void OracleTimeline::begin_probe() {
  probe_ = Mark{clock(), seq_, pending_, open_};
}

void OracleTimeline::rollback() {
  if (!probe_) throw_error("oracle: rollback without a probe");
  tokens_.resize(probe_->clock);
  seq_ = probe_->seq;
  pending_ = probe_->pending;
  open_ = probe_->open;
  probe_.reset();
}

OracleView OracleTimeline::global_view(uint64_t query_clock) const {
  OracleView view;
  if (!sealed_) {
    for (uint64_t c = 0; c <= query_clock; ++c)
      view.keys.push_back({SlotGroup::anchor, 0, c, static_cast<int64_t>(c)});
    view.query_pos = static_cast<int64_t>(query_clock);
    return view;
  }
  int64_t pos = 0;
  for (uint64_t c = 0; c < n_sys_; ++c) view.keys.push_back({SlotGroup::anchor, 0, c, pos++});
  for (const Episode& e : episodes_)
    for (uint32_t i = 0; i < e.count; ++i)
      view.keys.push_back({SlotGroup::recall, e.id, e.stored_pos + i, pos++});
  for (uint64_t c = n_sys_; c <= query_clock; ++c)
    if (tokens_[c].live) {
      view.query_pos = pos;  // ends at the query's own entry
      view.keys.push_back({SlotGroup::window, 0, c, pos++});
    }
  return view;
}

OracleView OracleTimeline::local_view(uint64_t query_clock, uint32_t window) const {
  OracleView view;
  view.query_pos = static_cast<int64_t>(query_clock);
  for (uint64_t c = 0; c <= query_clock; ++c)
    if (query_clock - c < window)
      view.keys.push_back({c < n_sys_ || !sealed_ ? SlotGroup::anchor : SlotGroup::window, 0, c,
                           static_cast<int64_t>(c)});
  return view;
}

void oracle_attention(uint32_t n_head, uint32_t n_head_kv, uint32_t head_dim, const RopeFreqs& rope,
                      const float* q, double query_pos, std::span<const OracleKv> keys, float scale,
                      float* out) {
  // Rotation of one head in double: pairs as in ops/rope.h, angles pos * inv_freq.
  const auto rotate = [&](const float* x, double pos, std::vector<double>& y) {
    y.assign(x, x + head_dim);
    const uint32_t half = rope.n_rot / 2;
    for (uint32_t i = 0; i < half; ++i) {
      const uint32_t a = rope.style == RopeStyle::normal ? 2 * i : i;
      const uint32_t b = rope.style == RopeStyle::normal ? 2 * i + 1 : i + half;
      const double c = std::cos(pos * rope.inv_freq[i]), s = std::sin(pos * rope.inv_freq[i]);
      y[a] = x[a] * c - x[b] * s;
      y[b] = x[a] * s + x[b] * c;
    }
  };
  const uint32_t rep = n_head / n_head_kv;
  std::vector<double> qr, kr, scores(keys.size()), acc(head_dim);
  for (uint32_t h = 0; h < n_head; ++h) {
    const uint32_t g = h / rep;
    rotate(q + size_t{h} * head_dim, query_pos, qr);
    double mx = -INFINITY;
    for (size_t j = 0; j < keys.size(); ++j) {
      rotate(keys[j].k + size_t{g} * head_dim, keys[j].position, kr);
      double s = 0;
      for (uint32_t d = 0; d < head_dim; ++d) s += qr[d] * kr[d];
      scores[j] = scale * s;
      mx = std::max(mx, scores[j]);
    }
    double sum = 0;
    for (double& s : scores) sum += (s = std::exp(s - mx));
    std::fill(acc.begin(), acc.end(), 0.0);
    for (size_t j = 0; j < keys.size(); ++j)
      for (uint32_t d = 0; d < head_dim; ++d)
        acc[d] += scores[j] / sum * keys[j].v[size_t{g} * head_dim + d];
    for (uint32_t d = 0; d < head_dim; ++d)
      out[size_t{h} * head_dim + d] = static_cast<float>(acc[d]);
  }
}

}  // namespace channel
