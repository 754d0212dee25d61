#include "util/finite.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace channel {
namespace {

// Every size around the lanes' and chunks' edges, each non-finite kind at each place; the
// extremes of the finite range stay finite.
TEST(AllFinite, FindsEachNonFiniteValueAnywhere) {
  const float kinds[] = {std::nanf(""), -std::nanf(""), std::numeric_limits<float>::infinity(),
                         -std::numeric_limits<float>::infinity()};
  for (const int64_t n : {0, 1, 15, 16, 17, 1023, 1024, 1025, 1040, 3000}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      x[static_cast<size_t>(i)] = i % 5 == 0   ? std::numeric_limits<float>::max()
                                  : i % 5 == 1 ? -std::numeric_limits<float>::max()
                                  : i % 5 == 2 ? std::numeric_limits<float>::denorm_min()
                                  : i % 5 == 3 ? -0.0f
                                               : static_cast<float>(i) * 0.37f;
    EXPECT_TRUE(all_finite(x.data(), n)) << n;
    for (int64_t at = 0; at < n; at += (n > 64 ? 7 : 1))
      for (const float bad : kinds) {
        std::vector<float> y = x;
        y[static_cast<size_t>(at)] = bad;
        ASSERT_FALSE(all_finite(y.data(), n)) << n << " at " << at;
        ASSERT_TRUE(all_finite(y.data(), at)) << n << " before " << at;  // only what is asked
      }
  }
}

}  // namespace
}  // namespace channel
