// channel::Error: the one exception type for bad input and failed operations.
// Readers throw it with a message that names the file, field and byte offset;
// frontends (CLI, C API) catch it at the boundary and turn it into a one-line
// error and a non-zero exit or an error code. Asserts are for our own bugs only.
#pragma once

#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace channel {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// throw_error("gguf: {}: bad magic at offset {}", path, 0)
template <typename... Args>
[[noreturn]] void throw_error(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace channel
