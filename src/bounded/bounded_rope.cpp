// BoundedRope: table construction (f64 angles, one f32 rounding) and the per-model cache.
#include "bounded/bounded_rope.h"

#include "ops/rope.h"

namespace channel {

BoundedRope::BoundedRope(int window, std::span<const double> inv_freq)
    : window_(window),
      half_(static_cast<int>(inv_freq.size())),
      inv_freq_(inv_freq.begin(), inv_freq.end()),
      cos_(static_cast<size_t>(window) * inv_freq.size()),
      sin_(static_cast<size_t>(window) * inv_freq.size()) {
  std::vector<float> cs(2 * static_cast<size_t>(half_));  // [rd/2] (cos, sin) pairs
  for (int delta = 0; delta < window_; ++delta) {
    rope_cos_sin_f64(inv_freq_, static_cast<double>(delta), cs.data());
    for (int i = 0; i < half_; ++i) {
      cos_[static_cast<size_t>(delta) * half_ + i] = cs[2 * static_cast<size_t>(i)];
      sin_[static_cast<size_t>(delta) * half_ + i] = cs[2 * static_cast<size_t>(i) + 1];
    }
  }
}

std::shared_ptr<const BoundedRope> BoundedRopeCache::get(int window, int rope_dims, double base) {
  std::lock_guard lock(mutex_);
  for (const Entry& e : entries_) {
    if (e.window == window && e.rope_dims == rope_dims && e.base == base) return e.rope;
  }
  auto rope = std::make_shared<const BoundedRope>(
      window, rope_inv_freq(static_cast<uint32_t>(rope_dims), base));
  entries_.push_back({window, rope_dims, base, rope});
  return rope;
}

size_t BoundedRopeCache::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

}  // namespace channel
