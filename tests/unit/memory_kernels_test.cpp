// memory_kernels.h: the centroid scan, the int8 scan and f16 conversion against their scalar
// references at awkward sizes and misaligned starts.
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "memory/memory_kernels.h"
#include "ops/fp16.h"

namespace channel {
namespace {

constexpr size_t kSizes[] = {0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 63, 65, 127, 129, 1000, 3840};

TEST(MemoryKernels, CentroidDotsMatchReference) {
  std::mt19937 rng(2);
  std::normal_distribution<float> nd;
  for (size_t off : {0, 2, 6}) {  // byte offsets of the rows (f16 needs 2-byte alignment)
    for (size_t dim : kSizes) {
      if (dim == 0) continue;
      const size_t n_rows = 5;
      const size_t stride = off + 2 * dim + 10;
      std::vector<uint8_t> rows(stride * n_rows + 64);
      std::vector<float> q(dim + 1);
      for (auto& x : q) x = nd(rng);
      for (size_t r = 0; r < n_rows; ++r) {
        for (size_t i = 0; i < dim; ++i) {
          const uint16_t h = fp32_to_fp16(nd(rng));
          std::memcpy(rows.data() + off + r * stride + 2 * i, &h, 2);
        }
      }
      std::vector<float> d(n_rows), n2(n_rows), dr(n_rows), n2r(n_rows);
      const float* qp = q.data() + (off ? 1 : 0);  // a misaligned query too
      centroid_dots(rows.data() + off, stride, n_rows, qp, dim, d.data(), n2.data());
      centroid_dots_ref(rows.data() + off, stride, n_rows, qp, dim, dr.data(), n2r.data());
      for (size_t r = 0; r < n_rows; ++r) {
        const float tol = 1e-5f * static_cast<float>(dim) + 1e-5f;
        ASSERT_NEAR(d[r], dr[r], tol * (1 + std::abs(dr[r]))) << "dim=" << dim << " off=" << off;
        ASSERT_NEAR(n2[r], n2r[r], tol * (1 + n2r[r])) << "dim=" << dim;
      }
    }
  }
}

TEST(MemoryKernels, F32ToF16MatchesReference) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> ud(-70000.0f, 70000.0f);
  std::vector<float> x(4000);
  for (size_t i = 0; i < x.size(); ++i) {
    const float mag = std::pow(10.0f, static_cast<float>(static_cast<int>(i % 13)) - 8.0f);
    x[i] = ud(rng) * mag / 70000.0f * (i % 17 == 0 ? 1e5f : 1.0f);  // subnormals .. overflow
  }
  for (size_t off : {0, 1, 3}) {
    for (size_t n : kSizes) {
      if (n + off > x.size()) continue;
      std::vector<uint16_t> a(n + 1), b(n + 1);
      f32_to_f16_row(x.data() + off, a.data() + off % 2, n);
      f32_to_f16_row_ref(x.data() + off, b.data() + off % 2, n);
      ASSERT_EQ(a, b) << "n=" << n << " off=" << off;
    }
  }
}

}  // namespace
}  // namespace channel
