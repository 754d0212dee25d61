// BoundedState: insertion with undo history, truncation, snapshots.
#include "bounded/bounded_state.h"

#include <algorithm>
#include <cstring>

#include "util/error.h"

namespace channel {

namespace {
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}
}  // namespace

BoundedState::BoundedState(int n_kv_heads, int window, int head_dim)
    : kvh_(n_kv_heads),
      window_(window),
      hd_(head_dim),
      ring_k_(static_cast<size_t>(n_kv_heads) * window * head_dim, 0.0f),
      ring_v_(ring_k_.size(), 0.0f),
      undo_k_(static_cast<size_t>(UNDO_DEPTH) * n_kv_heads * head_dim, 0.0f),
      undo_v_(undo_k_.size(), 0.0f) {
  if (n_kv_heads <= 0 || window <= 0 || head_dim <= 0) {
    throw_error("bounded state: bad geometry (n_kv_heads {}, window {}, head_dim {})", n_kv_heads,
                window, head_dim);
  }
}

void BoundedState::insert(const float* k, const float* v) {
  const int64_t slot = bounded_slot_of(seen_, window_);
  const size_t row = static_cast<size_t>(seen_ % UNDO_DEPTH) * kvh_ * hd_;
  const size_t bytes = static_cast<size_t>(hd_) * sizeof(float);
  for (int h = 0; h < kvh_; ++h) {
    float* rk = ring_k_.data() + offset(h, slot);
    float* rv = ring_v_.data() + offset(h, slot);
    std::memcpy(undo_k_.data() + row + static_cast<size_t>(h) * hd_, rk, bytes);
    std::memcpy(undo_v_.data() + row + static_cast<size_t>(h) * hd_, rv, bytes);
    std::memcpy(rk, k + static_cast<size_t>(h) * hd_, bytes);
    std::memcpy(rv, v + static_cast<size_t>(h) * hd_, bytes);
  }
  ++seen_;
  undo_len_ = std::min(undo_len_ + 1, UNDO_DEPTH);
}

void BoundedState::truncate_last(int k) {
  if (k < 0 || k > UNDO_DEPTH || k > undo_len_) {
    throw_error(
        "bounded state: cannot truncate the last {} tokens: undo history holds {} "
        "(UNDO_DEPTH {})",
        k, undo_len_, UNDO_DEPTH);
  }
  const size_t bytes = static_cast<size_t>(hd_) * sizeof(float);
  for (int i = 0; i < k; ++i) {
    --seen_;
    const int64_t slot = bounded_slot_of(seen_, window_);
    const size_t row = static_cast<size_t>(seen_ % UNDO_DEPTH) * kvh_ * hd_;
    for (int h = 0; h < kvh_; ++h) {
      std::memcpy(ring_k_.data() + offset(h, slot), undo_k_.data() + row + h * hd_, bytes);
      std::memcpy(ring_v_.data() + offset(h, slot), undo_v_.data() + row + h * hd_, bytes);
    }
  }
  undo_len_ -= k;
}

void BoundedState::clear() {
  std::fill(ring_k_.begin(), ring_k_.end(), 0.0f);
  std::fill(ring_v_.begin(), ring_v_.end(), 0.0f);
  std::fill(undo_k_.begin(), undo_k_.end(), 0.0f);
  std::fill(undo_v_.begin(), undo_v_.end(), 0.0f);
  seen_ = 0;
  undo_len_ = 0;
}

void BoundedState::load_ring(uint64_t seen, const std::vector<float>& k,
                             const std::vector<float>& v) {
  if (k.size() != ring_k_.size() || v.size() != ring_v_.size())
    throw_error("bounded: a ring of {} + {} floats does not fit the state's {} + {}", k.size(),
                v.size(), ring_k_.size(), ring_v_.size());
  ring_k_ = k;
  ring_v_ = v;
  std::fill(undo_k_.begin(), undo_k_.end(), 0.0f);
  std::fill(undo_v_.begin(), undo_v_.end(), 0.0f);
  seen_ = seen;
  undo_len_ = 0;
}

BoundedSnapshot BoundedState::snapshot() const {
  return BoundedSnapshot{*this};
}

void BoundedState::restore(const BoundedSnapshot& snap) {
  const BoundedState& s = snap.state;
  if (s.kvh_ != kvh_ || s.window_ != window_ || s.hd_ != hd_) {
    throw_error(
        "bounded state: snapshot geometry (kvh {}, W {}, hd {}) differs from the state's "
        "(kvh {}, W {}, hd {})",
        s.kvh_, s.window_, s.hd_, kvh_, window_, hd_);
  }
  // Equal sizes: the copies reuse the existing buffers (no allocation, no size change).
  std::copy(s.ring_k_.begin(), s.ring_k_.end(), ring_k_.begin());
  std::copy(s.ring_v_.begin(), s.ring_v_.end(), ring_v_.begin());
  std::copy(s.undo_k_.begin(), s.undo_k_.end(), undo_k_.begin());
  std::copy(s.undo_v_.begin(), s.undo_v_.end(), undo_v_.begin());
  seen_ = s.seen_;
  undo_len_ = s.undo_len_;
}

size_t BoundedState::bytes() const {
  return (ring_k_.size() + ring_v_.size() + undo_k_.size() + undo_v_.size()) * sizeof(float);
}

bool BoundedState::bit_equal(const BoundedState& o) const {
  return kvh_ == o.kvh_ && window_ == o.window_ && hd_ == o.hd_ && seen_ == o.seen_ &&
         undo_len_ == o.undo_len_ && same_bits(ring_k_, o.ring_k_) &&
         same_bits(ring_v_, o.ring_v_) && same_bits(undo_k_, o.undo_k_) &&
         same_bits(undo_v_, o.undo_v_);
}

bool BoundedState::same_ring(const BoundedState& o) const {
  return kvh_ == o.kvh_ && window_ == o.window_ && hd_ == o.hd_ && seen_ == o.seen_ &&
         same_bits(ring_k_, o.ring_k_) && same_bits(ring_v_, o.ring_v_);
}

}  // namespace channel
