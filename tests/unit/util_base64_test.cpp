// base64_encode against RFC 4648's test vectors.
#include <gtest/gtest.h>

#include <string_view>

#include "util/base64.h"

namespace channel {
namespace {

std::string encode(std::string_view s) {
  return base64_encode({reinterpret_cast<const unsigned char*>(s.data()), s.size()});
}

TEST(Base64, Rfc4648Vectors) {
  EXPECT_EQ(encode(""), "");
  EXPECT_EQ(encode("f"), "Zg==");
  EXPECT_EQ(encode("fo"), "Zm8=");
  EXPECT_EQ(encode("foo"), "Zm9v");
  EXPECT_EQ(encode("foob"), "Zm9vYg==");
  EXPECT_EQ(encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(encode("foobar"), "Zm9vYmFy");
  const unsigned char high[] = {0xff, 0xfe, 0xfd, 0x00, 0x80};
  EXPECT_EQ(base64_encode(high), "//79AIA=");
}

}  // namespace
}  // namespace channel
