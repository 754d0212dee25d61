// bytes.h: the little-endian byte writer and the bounds-checked reader behind Channel's
// binary formats (session files, the KV ring state, GGUF). Values are copied as they lie in
// memory: the engine runs on little-endian hosts only, which the static_assert makes sure of.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "util/error.h"

namespace channel {

static_assert(std::endian::native == std::endian::little, "Channel's formats are little-endian");

// Appends values and bytes to `out`.
struct ByteWriter {
  std::vector<uint8_t> out;

  template <typename T>
  void put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    bytes(&v, sizeof(T));
  }
  void bytes(const void* p, size_t n) {
    if (n == 0) return;
    const size_t at = out.size();
    out.resize(at + n);
    std::memcpy(out.data() + at, p, n);
  }
  // u64 length, then the bytes (GGUF strings).
  void string(std::string_view s) {
    put<uint64_t>(s.size());
    bytes(s.data(), s.size());
  }
  // Opens a section "u32 tag, u32 0, u64 length"; returns where its length goes (patched by
  // end_section).
  size_t begin_section(uint32_t tag) {
    put(tag), put<uint32_t>(0), put<uint64_t>(0);
    return out.size() - 8;
  }
  void end_section(size_t length_at) {
    const uint64_t n = out.size() - (length_at + 8);
    std::memcpy(out.data() + length_at, &n, 8);
  }
};

// Reads values from `in` starting at `at`; every failure throws channel::Error
// "PREFIX: WHY at offset N", so the message names the source, the field and the byte.
struct ByteReader {
  std::span<const uint8_t> in;
  std::string prefix;  // "session.chs: session file"
  size_t at = 0;

  template <typename T>
  T get(const char* field) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (in.size() - at < sizeof(T)) fail(at, fmt::format("truncated reading {}", field));
    T v;
    std::memcpy(&v, in.data() + at, sizeof(T));
    at += sizeof(T);
    return v;
  }
  std::span<const uint8_t> take(size_t n, const char* field) {
    if (in.size() - at < n) fail(at, fmt::format("truncated reading {}", field));
    const auto s = in.subspan(at, n);
    at += n;
    return s;
  }
  // The payload of the next "u32 tag, u32 0, u64 length" section, which must be `tag`.
  ByteReader section(uint32_t tag, const char* name) {
    const size_t start = at;
    if (get<uint32_t>("section tag") != tag) fail(start, fmt::format("expected section {}", name));
    if (get<uint32_t>("section padding") != 0) fail(start + 4, "non-zero section padding");
    const auto n = get<uint64_t>("section length");
    if (n > in.size() - at) fail(start + 8, fmt::format("section {} runs past the end", name));
    ByteReader r{in.subspan(0, at + n), prefix, at};
    at += n;
    return r;
  }
  void expect_end(const char* name) const {
    if (at != in.size())
      fail(at, fmt::format("{} trailing bytes in section {}", in.size() - at, name));
  }
  [[noreturn]] void fail(size_t offset, std::string_view why) const {
    throw_error("{}: {} at offset {}", prefix, why, offset);
  }
};

}  // namespace channel
