// util/hash.h: CRC-32C against its bitwise reference at every small length and offset and
// around the fast path's round sizes; FNV-1a 64 and splitmix64 against published values.
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "util/hash.h"

namespace channel {
namespace {

constexpr size_t kSizes[] = {0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 63, 65, 127, 129, 1000, 3840};

TEST(Crc32c, KnownValues) {
  const char* check = "123456789";
  EXPECT_EQ(crc32c_ref(0, check, 9), 0xE3069283u);
  EXPECT_EQ(crc32c(0, check, 9), 0xE3069283u);
  EXPECT_EQ(crc32c(0, "", 0), 0u);
  std::vector<uint8_t> zeros(32, 0);
  EXPECT_EQ(crc32c_ref(0, zeros.data(), 32), 0x8A9136AAu);  // RFC 3720 B.4
  std::vector<uint8_t> ones(32, 0xFF);
  EXPECT_EQ(crc32c_ref(0, ones.data(), 32), 0x62A8AB43u);
}

TEST(Crc32c, MatchesReferenceAndChains) {
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

// Parts checked apart and joined give the whole buffer's crc, at every split of small buffers
// and for parts of a few MB (as a recall checks an episode's planes on several threads).
TEST(Crc32c, CombinesParts) {
  std::mt19937 rng(7);
  std::vector<uint8_t> buf(3 << 20);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (size_t n : {0, 1, 9, 100}) {
    for (size_t split = 0; split <= n; ++split)
      ASSERT_EQ(crc32c_combine(crc32c(0, buf.data(), split),
                               crc32c(0, buf.data() + split, n - split), n - split),
                crc32c(0, buf.data(), n))
          << n << " split at " << split;
  }
  uint32_t joined = 0;
  const size_t part = 1 << 20;
  std::vector<uint32_t> parts;
  for (size_t at = 0; at < buf.size(); at += part) {
    parts.push_back(crc32c(0, buf.data() + at, part));
    joined = crc32c_combine(joined, parts.back(), part);
  }
  EXPECT_EQ(joined, crc32c(0, buf.data(), buf.size()));
  EXPECT_EQ(crc32c_join(parts, part), joined);
  EXPECT_EQ(crc32c_join({}, part), 0u);
  // The shift operator a device combines with: the same as crc32c_combine.
  for (size_t len : {0, 1, 7, 4096, 131072})
    EXPECT_EQ(crc32c_mul(parts[0], crc32c_shift(len)) ^ parts[1],
              crc32c_combine(parts[0], parts[1], len))
        << len;
}

// Every length 0..2048 at every start offset 0..15. The reference for each prefix is chained
// from the previous one (crc32c_ref of one more byte), so the sweep stays fast under ASan.
TEST(Crc32c, EveryLengthAndOffset) {
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
TEST(Crc32c, LargeLengths) {
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
TEST(Crc32c, ChainsAtRandomSplits) {
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

TEST(Fnv1a64, KnownValues) {
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ull);
  EXPECT_EQ(fnv1a64("bar", fnv1a64("foo")), fnv1a64("foobar"));  // chains
}

TEST(Splitmix64, KnownSequence) {
  uint64_t state = 1234567;
  EXPECT_EQ(splitmix64(state), 6457827717110365317ull);
  EXPECT_EQ(splitmix64(state), 3203168211198807973ull);
  EXPECT_EQ(state, 1234567 + 2 * 0x9e3779b97f4a7c15ull);
}

}  // namespace
}  // namespace channel
