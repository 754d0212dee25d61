// WeightReadAhead (cuda_l2_ahead.h).
#include "backend/cuda/cuda_l2_ahead.h"

#include <algorithm>

namespace channel::cuda {

namespace {

// Bytes of one row of a repacked matrix: its quants (or elements) and its scales.
int64_t q_row_bytes(const DevMatrix& m) {
  return static_cast<int64_t>(repacked_q_bytes(m.type, m.rows, m.cols)) / std::max<int64_t>(m.rows, 1);
}
int64_t d_row_bytes(const DevMatrix& m) {
  if (!m.d) return 0;
  return static_cast<int64_t>(repacked_d_bytes(m.type, m.rows, m.cols)) / std::max<int64_t>(m.rows, 1);
}

}  // namespace

WeightReadAhead::WeightReadAhead(const WeightsLayout& w, const L2Ahead& budget) : budget_(budget) {
  for (const DevLayer& L : w.layers) {
    if (L.qkv.q) {
      order_.push_back(&L.qkv);
    } else {
      for (const DevMatrix* m : {&L.wq, &L.wk, &L.wv}) order_.push_back(m);
    }
    order_.push_back(&L.wo);
    if (L.gate_up.q) {
      order_.push_back(&L.gate_up);
    } else {
      order_.push_back(&L.gate);
      order_.push_back(&L.up);
    }
    order_.push_back(&L.down);
  }
  order_.push_back(&w.output);
}

int64_t WeightReadAhead::bytes_between(Cursor from, Cursor to) const {
  int64_t bytes = 0;
  while (from.matrix < to.matrix) {
    const DevMatrix& m = *order_[from.matrix];
    bytes += (m.rows - from.row) * (q_row_bytes(m) + d_row_bytes(m));
    ++from.matrix;
    from.row = 0;
  }
  if (from.matrix < order_.size() && to.row > from.row) {
    const DevMatrix& m = *order_[from.matrix];
    bytes += (to.row - from.row) * (q_row_bytes(m) + d_row_bytes(m));
  }
  return bytes;
}

std::vector<L2Ranges> WeightReadAhead::after(const DevMatrix& m, bool attention_next,
                                             cudaStream_t s) {
  std::vector<L2Ranges> sent;
  // Find m at or after the last product (the order is walked once a step, then wraps).
  size_t i = current_;
  for (size_t k = 0; k < order_.size() && order_[i] != &m; ++k) i = (i + 1) % order_.size();
  if (order_[i] != &m) return sent;  // not a decode weight
  if (i < current_) next_ = Cursor{};  // a new step
  current_ = i;
  const Cursor start{i + 1, 0};
  if (next_.matrix < start.matrix) next_ = start;
  int64_t budget = attention_next ? budget_.after_qkv : budget_.after_other;
  budget = std::min(budget, budget_.cap - bytes_between(start, next_));
  L2Ranges ranges;
  auto add = [&](const void* base, int64_t row_bytes, int64_t row, int64_t rows) {
    if (!base || row_bytes == 0) return;
    if (ranges.count == kL2Ranges) {
      l2_prefetch(ranges, s);
      sent.push_back(ranges);
      ranges = L2Ranges{};
    }
    ranges.ptr[ranges.count] = static_cast<const char*>(base) + row * row_bytes;
    ranges.bytes[ranges.count] = rows * row_bytes;
    ++ranges.count;
  };
  while (budget > 0 && next_.matrix < order_.size()) {
    const DevMatrix& w = *order_[next_.matrix];
    const int64_t qb = q_row_bytes(w), db = d_row_bytes(w);
    const int64_t rows = std::min(w.rows - next_.row, budget / std::max<int64_t>(qb + db, 1));
    if (rows <= 0) break;
    add(w.q, qb, next_.row, rows);
    add(w.d, db, next_.row, rows);
    budget -= rows * (qb + db);
    next_.row += rows;
    if (next_.row == w.rows) next_ = Cursor{next_.matrix + 1, 0};
  }
  if (ranges.count > 0) {
    l2_prefetch(ranges, s);
    sent.push_back(ranges);
  }
  return sent;
}

}  // namespace channel::cuda
