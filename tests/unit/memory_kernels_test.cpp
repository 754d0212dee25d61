// memory_kernels.h: CRC-32C, the centroid scan and f16 conversion against their scalar
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

TEST(MemoryKernels, Crc32cKnownValues) {
  const char* check = "123456789";
  EXPECT_EQ(crc32c_ref(0, check, 9), 0xE3069283u);
  EXPECT_EQ(crc32c(0, check, 9), 0xE3069283u);
  EXPECT_EQ(crc32c(0, "", 0), 0u);
  std::vector<uint8_t> zeros(32, 0);
  EXPECT_EQ(crc32c_ref(0, zeros.data(), 32), 0x8A9136AAu);  // RFC 3720 B.4
  std::vector<uint8_t> ones(32, 0xFF);
  EXPECT_EQ(crc32c_ref(0, ones.data(), 32), 0x62A8AB43u);
}

TEST(MemoryKernels, Crc32cMatchesReferenceAndChains) {
  std::mt19937 rng(1);
  std::vector<uint8_t> buf(5000);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (size_t off : {0, 1, 3, 7}) {
    for (size_t n : kSizes) {
      const uint8_t* p = buf.data() + off;
      ASSERT_EQ(crc32c(0, p, n), crc32c_ref(0, p, n)) << "n=" << n << " off=" << off;
      const size_t half = n / 2;
      ASSERT_EQ(crc32c(crc32c(0, p, half), p + half, n - half), crc32c_ref(0, p, n));
    }
  }
}

// Every length 0..2048 at every start offset 0..15. The reference for each prefix is chained
// from the previous one (crc32c_ref of one more byte), so the sweep stays fast under ASan.
TEST(MemoryKernels, Crc32cEveryLengthAndOffset) {
  std::mt19937 rng(3);
  std::vector<uint8_t> buf(2048 + 16);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (size_t off = 0; off < 16; ++off) {
    const uint8_t* p = buf.data() + off;
    uint32_t ref = 0;
    for (size_t n = 0; n <= 2048; ++n) {
      if (n > 0) ref = crc32c_ref(ref, p + n - 1, 1);
      ASSERT_EQ(crc32c(0, p, n), ref) << "n=" << n << " off=" << off;
    }
  }
}

// Lengths around the three-stream round sizes (3 x 64, 256, 1024 and 4096 bytes) and a large
// odd one, at a few offsets, with zero and nonzero initial crc.
TEST(MemoryKernels, Crc32cLargeLengths) {
  std::mt19937 rng(4);
  std::vector<uint8_t> buf((1u << 20) + 13 + 16);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  std::vector<size_t> sizes = {4095, 4096, 4097, 8191, 8192, 8193, 1u << 15, (1u << 15) + 5};
  for (size_t round : {3 * 64, 3 * 256, 3 * 1024, 3 * 4096})
    for (size_t k : {1, 2, 3}) {
      sizes.push_back(k * round - 1);
      for (size_t d : {0, 1, 8, 9}) sizes.push_back(k * round + d);
    }
  // One round of every size, then a tail.
  sizes.push_back(3 * 4096 + 3 * 1024 + 3 * 256 + 3 * 64 + 7);
  for (size_t off : {0, 5, 15}) {
    for (size_t n : sizes) {
      const uint8_t* p = buf.data() + off;
      ASSERT_EQ(crc32c(0, p, n), crc32c_ref(0, p, n)) << "n=" << n << " off=" << off;
      ASSERT_EQ(crc32c(0xDEADBEEFu, p, n), crc32c_ref(0xDEADBEEFu, p, n)) << "n=" << n;
    }
  }
  const size_t big = (1u << 20) + 13;
  EXPECT_EQ(crc32c(0, buf.data() + 3, big), crc32c_ref(0, buf.data() + 3, big));
  EXPECT_EQ(crc32c(0x12345678u, buf.data(), big), crc32c_ref(0x12345678u, buf.data(), big));
}

// crc32c(crc32c(c, a), b) == crc32c_ref(c, a ++ b) at random split points and initial crcs.
TEST(MemoryKernels, Crc32cChainsAtRandomSplits) {
  std::mt19937 rng(5);
  std::vector<uint8_t> buf(40000);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (size_t n : {1, 100, 193, 769, 3073, 12289, 40000}) {
    const uint32_t whole = crc32c_ref(0, buf.data(), n);
    for (int t = 0; t < 8; ++t) {
      const size_t split = rng() % (n + 1);
      const uint32_t a = crc32c(0, buf.data(), split);
      ASSERT_EQ(crc32c(a, buf.data() + split, n - split), whole) << "n=" << n << " split=" << split;
    }
    const uint32_t init = static_cast<uint32_t>(rng());
    ASSERT_EQ(crc32c(init, buf.data(), n), crc32c_ref(init, buf.data(), n)) << "n=" << n;
  }
}

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
