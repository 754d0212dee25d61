// hash.h: the checksums and mixers every layer shares: CRC-32C (record and file checksums),
// FNV-1a 64 (model identity, name hashing) and splitmix64 (seeding random generators).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace channel {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78, init and final xor 0xFFFFFFFF),
// the checksum of iSCSI/ext4/Btrfs. crc32c(0, "123456789") == 0xE3069283.
// `crc` chains calls: crc32c(crc32c(0, a), b) == crc32c(0, a ++ b).
uint32_t crc32c_ref(uint32_t crc, const void* data, size_t n);  // bitwise, obviously correct
uint32_t crc32c(uint32_t crc, const void* data, size_t n);      // SSE4.2 crc32 when available
// crc32c(0, A ++ B) from crc_a = crc32c(0, A), crc_b = crc32c(0, B) and B's length, so that
// parts of a buffer can be checked apart (on several threads) and joined.
uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);
// crc32c(0, P0 ++ P1 ++ ...) from the parts' crc32c(0, Pi), every part part_len bytes long.
uint32_t crc32c_join(std::span<const uint32_t> parts, uint64_t part_len);
// The operator that shifts a checksum past len_b bytes (x^(8 len_b) mod P, reflected): a
// device that combines parts itself gets it from here, crc32c_combine(a, b, len_b) being
// crc32c_mul(a, crc32c_shift(len_b)) ^ b.
uint32_t crc32c_shift(uint64_t len_b);
uint32_t crc32c_mul(uint32_t a, uint32_t b);  // a * b mod P, reflected

// FNV-1a 64 of `bytes`, continuing from `h` (the offset basis by default).
inline constexpr uint64_t kFnv1a64Basis = 0xcbf29ce484222325ull;
constexpr uint64_t fnv1a64(std::string_view bytes, uint64_t h = kFnv1a64Basis) {
  for (const char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

// splitmix64: advances `state` and returns the next well-mixed 64-bit value.
constexpr uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace channel
