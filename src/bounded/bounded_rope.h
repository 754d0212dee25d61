// BoundedRope: the relative-rotation table of a bounded layer, cos/sin(Δ · inv_freq[i]) for
// Δ ∈ [0, W) and i ∈ [0, rd/2), plus the small cache that lets a model build each distinct
// table once. The operator rotates the query by the distance Δ = t − j, never by a position.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

namespace channel {

class BoundedRope {
 public:
  // Angles Δ · inv_freq[i] are computed in f64 and rounded once to f32 (rope_cos_sin_f64 of
  // ops/rope.h; inv_freq from rope_inv_freq, base^(−2i/rd), the NEOX/HF convention).
  BoundedRope(int window, std::span<const double> inv_freq);

  int window() const { return window_; }
  int half() const { return half_; }  // rd / 2
  std::span<const double> inv_freq() const { return inv_freq_; }
  const float* cos(int delta) const { return cos_.data() + static_cast<size_t>(delta) * half_; }
  const float* sin(int delta) const { return sin_.data() + static_cast<size_t>(delta) * half_; }

 private:
  int window_;
  int half_;
  std::vector<double> inv_freq_;  // [rd/2]
  std::vector<float> cos_;        // [W][rd/2]
  std::vector<float> sin_;        // [W][rd/2]
};

// One table per distinct (W, rd, base) of a model; layers that share them share the table.
class BoundedRopeCache {
 public:
  std::shared_ptr<const BoundedRope> get(int window, int rope_dims, double base);
  size_t size() const;

 private:
  struct Entry {
    int window;
    int rope_dims;
    double base;
    std::shared_ptr<const BoundedRope> rope;
  };
  mutable std::mutex mutex_;
  std::vector<Entry> entries_;
};

}  // namespace channel
