// WeightReadAhead (backend/cuda/cuda_l2_ahead.h): after each decode product it sends the next
// bytes of the step's weight order towards L2, within its budgets.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "cuda_test_util.h"

#if defined(CHANNEL_HAS_CUDA)
#include "backend/cuda/cuda_l2_ahead.h"

namespace channel {
namespace {

// A two-layer Q8_0 layout over real device memory (the prefetches read it), q|k|v stacked in
// the first layer and not in the second.
struct FakeWeights {
  std::vector<cuda::DeviceBuffer> buffers;
  cuda::WeightsLayout w;

  cuda::DevMatrix matrix(int64_t rows, int64_t cols) {
    cuda::DevMatrix m{GgmlType::Q8_0, rows, cols, nullptr, nullptr};
    buffers.emplace_back(cuda::repacked_q_bytes(m.type, rows, cols), "test q");
    m.q = buffers.back().get();
    buffers.emplace_back(cuda::repacked_d_bytes(m.type, rows, cols), "test d");
    m.d = buffers.back().get();
    return m;
  }

  FakeWeights() {
    buffers.reserve(64);
    w.layers.resize(2);
    w.layers[0].qkv = matrix(96, 64);
    w.layers[1].wq = matrix(64, 64);
    w.layers[1].wk = matrix(16, 64);
    w.layers[1].wv = matrix(16, 64);
    for (cuda::DevLayer& L : w.layers) {
      L.wo = matrix(64, 64);
      L.gate_up = matrix(256, 64);
      L.down = matrix(64, 128);
    }
    w.output = matrix(1000, 64);
  }
};

// Bytes of a matrix's rows [0, rows): quants and scales.
int64_t row_bytes(const cuda::DevMatrix& m) {
  return static_cast<int64_t>(cuda::repacked_q_bytes(m.type, 1, m.cols) +
                              cuda::repacked_d_bytes(m.type, 1, m.cols));
}

// Where a range lies: the matrix of the order whose q or d buffer holds it, and the row span.
struct Hit {
  size_t matrix;
  bool scales;
  int64_t row0, rows;
};
Hit locate(const std::vector<const cuda::DevMatrix*>& order, const void* p, int64_t bytes) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  for (size_t i = 0; i < order.size(); ++i) {
    const cuda::DevMatrix& m = *order[i];
    for (bool scales : {false, true}) {
      const auto base = reinterpret_cast<uintptr_t>(scales ? m.d : m.q);
      const int64_t rb = static_cast<int64_t>(scales ? cuda::repacked_d_bytes(m.type, 1, m.cols)
                                                     : cuda::repacked_q_bytes(m.type, 1, m.cols));
      if (a >= base && a + bytes <= base + rb * m.rows) {
        EXPECT_EQ((a - base) % rb, 0u);
        EXPECT_EQ(bytes % rb, 0);
        return Hit{i, scales, static_cast<int64_t>(a - base) / rb, bytes / rb};
      }
    }
  }
  ADD_FAILURE() << "a range outside every matrix";
  return Hit{order.size(), false, 0, 0};
}

TEST(CudaL2Ahead, FollowsTheDecodeOrderWithinItsBudgets) {
  CHANNEL_REQUIRE_CUDA();
  FakeWeights f;
  const cuda::DevMatrix& wo0 = f.w.layers[0].wo;
  const int64_t after_qkv = 40 * row_bytes(wo0) + 10;  // a row's fraction is not sent
  const int64_t after_other = 16 * row_bytes(wo0);
  const int64_t cap = 100 * row_bytes(wo0);
  cuda::WeightReadAhead ahead(f.w, cuda::L2Ahead{after_qkv, after_other, cap});
  const auto& order = ahead.order();
  const cuda::DevLayer &L0 = f.w.layers[0], &L1 = f.w.layers[1];
  const std::vector<const cuda::DevMatrix*> want = {&L0.qkv, &L0.wo, &L0.gate_up, &L0.down,
                                                    &L1.wq,  &L1.wk, &L1.wv,      &L1.wo,
                                                    &L1.gate_up, &L1.down, &f.w.output};
  ASSERT_EQ(order, want);

  // Every step: the product of each matrix in turn; what it sends must continue exactly where
  // the last send ended (or at the next matrix), never reach more than `cap` past the product
  // that runs next, and spend at most the budget.
  for (int step = 0; step < 2; ++step) {
    size_t cur_m = 0;
    int64_t cur_row = 0;  // the first row not yet sent
    for (size_t i = 0; i < order.size(); ++i) {
      const bool attention_next = order[i] == &L0.qkv || order[i] == &L1.wv;
      const std::vector<cuda::L2Ranges> sent = ahead.after(*order[i], attention_next, nullptr);
      if (cur_m < i + 1) {
        cur_m = i + 1;
        cur_row = 0;
      }
      int64_t spent = 0;
      for (const cuda::L2Ranges& r : sent)
        for (int k = 0; k < r.count; ++k) {
          const Hit h = locate(order, r.ptr[k], r.bytes[k]);
          ASSERT_LT(h.matrix, order.size());
          if (h.scales) continue;  // checked with its quants' rows
          if (h.row0 != cur_row) {  // the previous matrix was sent to its end
            EXPECT_EQ(cur_row, order[cur_m]->rows);
            EXPECT_EQ(h.row0, 0);
            ++cur_m;
            cur_row = 0;
          }
          EXPECT_EQ(h.matrix, cur_m);
          cur_row += h.rows;
          spent += h.rows * row_bytes(*order[h.matrix]);
        }
      EXPECT_LE(spent, attention_next ? after_qkv : after_other) << "after product " << i;
      if (i + 1 < order.size()) {
        // Bytes sent and not yet read: from the next product's first row to the cursor.
        int64_t ahead_bytes = 0;
        for (size_t m = i + 1; m < cur_m; ++m) ahead_bytes += order[m]->rows * row_bytes(*order[m]);
        if (cur_m < order.size()) ahead_bytes += cur_row * row_bytes(*order[cur_m]);
        EXPECT_LE(ahead_bytes, cap) << "after product " << i;
        if (i == 0) {
          EXPECT_GT(spent, after_qkv - row_bytes(wo0)) << "a full first budget";
        }
      } else {
        EXPECT_EQ(spent, 0) << "nothing follows the LM head";
      }
    }
  }
  cuda::check(cudaDeviceSynchronize(), "prefetch kernels");
}

TEST(CudaL2Ahead, NoBudgetSendsNothingAndStrangersAreIgnored) {
  CHANNEL_REQUIRE_CUDA();
  FakeWeights f;
  cuda::WeightReadAhead off(f.w, cuda::L2Ahead{});
  EXPECT_TRUE(off.after(f.w.layers[0].qkv, true, nullptr).empty());
  cuda::WeightReadAhead on(f.w, cuda::L2Ahead{1 << 20, 1 << 20, 1 << 20});
  const cuda::DevMatrix stranger = f.w.layers[0].wo;  // a copy: not one of the layout's
  EXPECT_TRUE(on.after(stranger, false, nullptr).empty());
  EXPECT_FALSE(on.after(f.w.layers[0].wo, false, nullptr).empty());
  cuda::check(cudaDeviceSynchronize(), "prefetch kernels");
}

}  // namespace
}  // namespace channel
#endif
