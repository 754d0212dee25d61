// Locating ../shared/testdata from tests. When it is absent the test is SKIPPED with a
// loud message (never silently passed): use CHANNEL_REQUIRE_TESTDATA() at the top.
#pragma once

#include <cstdio>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace channel::test {

inline std::filesystem::path testdata_dir() {
  if (const char* env = std::getenv("CHANNEL_TESTDATA_DIR")) return env;
  return CHANNEL_TESTDATA_DIR;
}

inline bool have_testdata() { return std::filesystem::exists(testdata_dir() / "MANIFEST.json"); }

inline std::string testdata_path(const std::string& rel) { return (testdata_dir() / rel).string(); }

}  // namespace channel::test

#define CHANNEL_REQUIRE_TESTDATA()                                                          \
  do {                                                                                      \
    if (!::channel::test::have_testdata()) {                                                \
      std::fprintf(stderr, "\n*** SKIPPED: reference test data not found at %s ***\n\n",   \
                   ::channel::test::testdata_dir().string().c_str());                       \
      GTEST_SKIP() << "reference test data not found at "                                   \
                   << ::channel::test::testdata_dir();                                      \
    }                                                                                       \
  } while (0)
