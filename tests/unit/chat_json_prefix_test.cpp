// JsonPrefix: what response_format json_object lets generation write.
#include <gtest/gtest.h>

#include "chat/json_prefix.h"

namespace channel {
namespace {

bool accepts(const std::string& text, bool* complete = nullptr) {
  JsonPrefix j;
  const bool ok = j.push(text);
  if (complete) *complete = j.complete();
  return ok;
}

TEST(JsonPrefix, AcceptsPrefixesOfObjects) {
  const std::string doc =
      R"({"a": [1, -2.5e+3, true, false, null, "x\"\u00e9"], "b": {"c": {}}, "d": []})";
  for (size_t n = 0; n <= doc.size(); ++n) EXPECT_TRUE(accepts(doc.substr(0, n))) << doc.substr(0, n);
  bool complete = false;
  EXPECT_TRUE(accepts(doc, &complete));
  EXPECT_TRUE(complete);
  EXPECT_TRUE(accepts(R"({"k": "v"})", &complete));
  EXPECT_TRUE(complete);
  EXPECT_TRUE(accepts(R"({"k": 12)", &complete));
  EXPECT_FALSE(complete);
}

TEST(JsonPrefix, RefusesWhatCannotBecomeAnObject) {
  for (const char* bad : {"[1]", "\"s\"", "12", "{a", "{\"a\" 1", "{\"a\": tru e", "{\"a\": 01",
                          "{\"a\": 1,}", "{\"a\": [1,]", "{\"a\": 1]", "{} x", "{\"a\": \"\\q\"",
                          "{\"a\": -}", "{\"a\": \"\n\"}", "{,", " {}", "{}\n",
                          "{\"a\":                  1}"}) {
    EXPECT_FALSE(accepts(bad)) << bad;
  }
  JsonPrefix j;
  ASSERT_TRUE(j.push("{\"a\": 1"));
  EXPECT_FALSE(j.push("x"));
  EXPECT_TRUE(j.push("}"));  // a refused push left the state as it was
  EXPECT_TRUE(j.complete());
}

}  // namespace
}  // namespace channel
