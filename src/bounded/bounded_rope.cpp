// BoundedRope: table construction (f64 angles, one f32 rounding) and the per-model cache.
#include "bounded/bounded_rope.h"

#include <cmath>

namespace channel {

std::vector<double> bounded_inv_freq(int rope_dims, double base) {
  std::vector<double> inv_freq(static_cast<size_t>(rope_dims / 2));
  for (int i = 0; i < rope_dims / 2; ++i) {
    inv_freq[i] = std::pow(base, -2.0 * i / rope_dims);
  }
  return inv_freq;
}

BoundedRope::BoundedRope(int window, std::span<const double> inv_freq)
    : window_(window),
      half_(static_cast<int>(inv_freq.size())),
      inv_freq_(inv_freq.begin(), inv_freq.end()),
      cos_(static_cast<size_t>(window) * inv_freq.size()),
      sin_(static_cast<size_t>(window) * inv_freq.size()) {
  for (int delta = 0; delta < window_; ++delta) {
    for (int i = 0; i < half_; ++i) {
      const double angle = static_cast<double>(delta) * inv_freq_[i];
      cos_[static_cast<size_t>(delta) * half_ + i] = static_cast<float>(std::cos(angle));
      sin_[static_cast<size_t>(delta) * half_ + i] = static_cast<float>(std::sin(angle));
    }
  }
}

std::shared_ptr<const BoundedRope> BoundedRopeCache::get(int window, int rope_dims, double base) {
  std::lock_guard lock(mutex_);
  for (const Entry& e : entries_) {
    if (e.window == window && e.rope_dims == rope_dims && e.base == base) return e.rope;
  }
  auto rope = std::make_shared<const BoundedRope>(window, bounded_inv_freq(rope_dims, base));
  entries_.push_back({window, rope_dims, base, rope});
  return rope;
}

size_t BoundedRopeCache::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

}  // namespace channel
