// The CLI's one error style: `channel: error: --flag: what is wrong (what is allowed)`, one
// line on stderr; exit 2 for a usage mistake (a flag, its value, a missing or extra argument),
// exit 1 for a failure while working (a bad file, a full disk). CLI11's own parse errors are
// rewritten into that style here.
#pragma once

#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "util/error.h"

namespace channel::cli {

inline constexpr int kExitRuntime = 1;
inline constexpr int kExitUsage = 2;

// A usage mistake found after parsing (flags that do not go together, a list entry that is
// not an id): exits 2 like a parse error.
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& message) : Error(message) {}
};

template <typename... Args>
[[noreturn]] void throw_usage(fmt::format_string<Args...> format, Args&&... args) {
  throw UsageError(fmt::format(format, std::forward<Args>(args)...));
}

// CLI11's message for `e`, in Channel's style: "--ctx: '1k' is not an integer (allowed:
// 1..16777216)", "-t: given 2 times (at most once)", "--text: missing (required)". `command`
// is the subcommand path for the hint ("run", "mem show"), empty for the program itself.
std::string describe_parse_error(const CLI::ParseError& e, const std::string& command);

// Prints "channel: error: MESSAGE" as one line (newlines become spaces).
void print_error(std::string message);
// Prints "channel: warning: MESSAGE" as one line.
void print_warning(std::string message);

}  // namespace channel::cli
