// The header every test file includes, precompiled once and reused by every test executable
// (tests/CMakeLists.txt). Measured: adding fmt, nlohmann/json or more standard headers here
// made the tests (and the same for the library) slower to compile with GCC, not faster.
#pragma once

#include <gtest/gtest.h>
