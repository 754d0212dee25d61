// Reading weights ahead during decode. A decode step reads every weight matrix once, always
// in the same order (per layer W_q|k|v, W_o, W_gate|up, W_down, then the LM head); between
// two products small kernels run (attention, norms) and HBM idles. After each product,
// WeightReadAhead sends the next bytes of that order towards L2 (l2_prefetch), so the next
// product finds its first rows cached. Budgets: l2_ahead() (cuda_kernels.h).
// Internal to the backend (needs the CUDA runtime headers).
#pragma once

#include <cstddef>
#include <vector>

#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/cuda_weights_impl.h"

namespace channel::cuda {

class WeightReadAhead {
 public:
  // The matrices decode reads for these weights, in order (stacked q|k|v and gate|up when the
  // upload stacked them).
  WeightReadAhead(const WeightsLayout& w, const L2Ahead& budget);

  // After the product of `m` (one of the matrices, in order) is enqueued on s; attention_next:
  // the attention kernels run before the next product (the longest idle stretch). Returns
  // the ranges it sent (tests).
  std::vector<L2Ranges> after(const DevMatrix& m, bool attention_next, cudaStream_t s);

  // The matrices in read order (tests).
  const std::vector<const DevMatrix*>& order() const { return order_; }

 private:
  struct Cursor {
    size_t matrix = 0;
    int64_t row = 0;
  };
  int64_t bytes_between(Cursor from, Cursor to) const;

  std::vector<const DevMatrix*> order_;
  L2Ahead budget_;
  size_t current_ = 0;  // the product enqueued last
  Cursor next_;         // the first row not yet sent towards L2
};

}  // namespace channel::cuda
