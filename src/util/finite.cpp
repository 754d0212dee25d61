#include "util/finite.h"

#include <cstring>

namespace channel {

namespace {

// 16 lanes as one vector (GCC/Clang vector extensions).
constexpr int64_t kLanes = 16;
typedef uint32_t Words __attribute__((vector_size(kLanes * sizeof(uint32_t))));

constexpr uint32_t kExponent = 0x7f800000u;  // all ones: Inf or NaN

bool finite_bits(uint32_t bits) {
  return (bits & kExponent) != kExponent;
}

}  // namespace

bool all_finite(const float* x, int64_t count) {
  const int64_t body = count / kLanes * kLanes;
  constexpr int64_t kChunk = 64 * kLanes;  // values between two looks at the lanes
  for (int64_t c = 0; c < body; c += kChunk) {
    const int64_t end = c + kChunk < body ? c + kChunk : body;
    Words bad{};
    for (int64_t i = c; i < end; i += kLanes) {
      Words w;
      std::memcpy(&w, x + i, sizeof w);
      bad |= (w & kExponent) == kExponent;
    }
    for (int64_t j = 0; j < kLanes; ++j)
      if (bad[j] != 0) return false;
  }
  for (int64_t i = body; i < count; ++i) {
    uint32_t bits;
    std::memcpy(&bits, x + i, sizeof bits);
    if (!finite_bits(bits)) return false;
  }
  return true;
}

}  // namespace channel
