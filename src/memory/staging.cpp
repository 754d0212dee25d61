// StagingBuffer: the consolidation triggers and the cutting of staged tokens into episodes.
#include "memory/staging.h"

#include <cmath>
#include <cstring>

#include "util/error.h"

namespace channel {

const char* cut_reason_name(CutReason r) {
  switch (r) {
    case CutReason::turn_end:
      return "turn_end";
    case CutReason::inactivity:
      return "inactivity";
    case CutReason::capacity:
      return "capacity";
    case CutReason::velocity:
      return "velocity";
    case CutReason::discontinuity:
      return "discontinuity";
    case CutReason::flush:
      return "flush";
  }
  return "?";
}

StagingBuffer::StagingBuffer(const StagingConfig& config, const StagingDims& dims, Sink sink)
    : config_(config), dims_(dims), sink_(std::move(sink)) {
  if (config_.capacity == 0) throw_error("staging: capacity must be at least 1 token");
  if (dims_.num_layers == 0 || dims_.hidden_size == 0 || dims_.kv_dim == 0) {
    throw_error("staging: num_layers, hidden_size and kv_dim must be > 0");
  }
}

void StagingBuffer::push(const StagedToken& t, std::span<const float* const> k_rows,
                         std::span<const float* const> v_rows, uint64_t now_ms) {
  const size_t H = dims_.hidden_size, D = dims_.kv_dim, nl = dims_.num_layers;
  if (t.hidden.size() != H)
    throw_error("staging: hidden state has {} values, expected {}", t.hidden.size(), H);
  if (k_rows.size() != nl || v_rows.size() != nl) {
    throw_error("staging: {} K and {} V rows for {} layers", k_rows.size(), v_rows.size(), nl);
  }
  const size_t QD = size_t{dims_.query_dim} * nl;
  if (QD > 0 && t.queries.size() != QD)
    throw_error("staging: queries have {} values, expected {}", t.queries.size(), QD);
  const size_t n = size();
  if (n > 0 && t.clock != cur_.start_clock + n) {
    cut(n, CutReason::discontinuity, kNoContinuation);
  } else if (n > 0 && config_.velocity_threshold > 0.0f) {
    const float* last = cur_.hidden.data() + (n - 1) * H;
    double d2 = 0.0;
    for (size_t i = 0; i < H; ++i) {
      const double d = static_cast<double>(t.hidden[i]) - last[i];
      d2 += d * d;
    }
    if (std::sqrt(d2) > config_.velocity_threshold)
      cut(n, CutReason::velocity, static_cast<uint32_t>(t.token));
  }
  if (size() >= config_.capacity) {
    const size_t c = span_cut_point();
    cut(c, CutReason::capacity,
        c < size() ? static_cast<uint32_t>(cur_.tokens[c]) : static_cast<uint32_t>(t.token));
  }
  if (cur_.tokens.empty()) cur_.start_clock = t.clock;
  cur_.tokens.push_back(t.token);
  cur_.slots.push_back(t.slot);
  cur_.hidden.insert(cur_.hidden.end(), t.hidden.begin(), t.hidden.end());
  if (QD > 0) cur_.queries.insert(cur_.queries.end(), t.queries.begin(), t.queries.end());
  const size_t base = cur_.kv.size();
  cur_.kv.resize(base + nl * 2 * D);
  for (size_t l = 0; l < nl; ++l) {  // [layer][K, V][kv_dim] of this token
    std::memcpy(cur_.kv.data() + base + (2 * l) * D, k_rows[l], D * sizeof(float));
    std::memcpy(cur_.kv.data() + base + (2 * l + 1) * D, v_rows[l], D * sizeof(float));
  }
  token_bits_.push_back(
      static_cast<uint8_t>(((t.span_end || t.turn_end) ? kSpanEnd : 0) | (t.tool ? kTool : 0)));
  last_push_ms_ = now_ms;
  if (t.turn_end && config_.cut_on_turn_end) cut(size(), CutReason::turn_end, kNoContinuation);
}

void StagingBuffer::poll(uint64_t now_ms) {
  if (config_.inactivity_ms > 0 && size() > 0 && now_ms >= last_push_ms_ + config_.inactivity_ms) {
    cut(size(), CutReason::inactivity, kNoContinuation);
  }
}

void StagingBuffer::flush(CutReason reason) {
  if (size() > 0) cut(size(), reason, kNoContinuation);
}

size_t StagingBuffer::span_cut_point() const {
  const size_t n = size();
  if (!config_.align_to_spans) return n;
  for (size_t i = n; i-- > n / 2;) {
    if (token_bits_[i] & kSpanEnd) return i + 1;  // cut after the boundary token
  }
  return n;
}

void StagingBuffer::cut(size_t n, CutReason reason, uint32_t continuation) {
  const size_t H = dims_.hidden_size;
  const size_t row = static_cast<size_t>(dims_.num_layers) * 2 * dims_.kv_dim;
  StagedEpisode rest;  // tokens [n, size) stay staged
  const size_t total = size();
  if (n < total) {
    rest.start_clock = cur_.start_clock + n;
    rest.tokens.assign(cur_.tokens.begin() + n, cur_.tokens.end());
    rest.slots.assign(cur_.slots.begin() + n, cur_.slots.end());
    rest.hidden.assign(cur_.hidden.begin() + n * H, cur_.hidden.end());
    rest.kv.assign(cur_.kv.begin() + n * row, cur_.kv.end());
    const size_t qrow = size_t{dims_.query_dim} * dims_.num_layers;
    if (qrow > 0) {
      rest.queries.assign(cur_.queries.begin() + n * qrow, cur_.queries.end());
      cur_.queries.resize(n * qrow);
    }
    cur_.tokens.resize(n);
    cur_.slots.resize(n);
    cur_.hidden.resize(n * H);
    cur_.kv.resize(n * row);
  }
  std::vector<uint8_t> rest_bits(token_bits_.begin() + n, token_bits_.end());
  cur_.flags = 0;
  for (size_t i = 0; i < n; ++i) {
    if (token_bits_[i] & kTool) cur_.flags |= kEpisodeHasTool;
  }
  cur_.reason = reason;
  cur_.continuation_token = continuation;
  cur_.x_before = x_prev_;
  x_prev_.assign(cur_.hidden.end() - H, cur_.hidden.end());
  ++episodes_cut_;
  StagedEpisode out = std::move(cur_);
  cur_ = std::move(rest);
  token_bits_ = std::move(rest_bits);
  sink_(std::move(out));
}

}  // namespace channel
