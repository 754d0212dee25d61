// fp16.h: scalar conversions between f32 and the 16-bit float formats of GGUF files
// (IEEE half "f16" and bfloat16 "bf16"), as raw uint16_t bits. Rounding is to nearest,
// ties to even, and NaN stays NaN (quieted), the same results llama.cpp produces.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace channel {

inline float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ff;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));  // inf / NaN
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

inline uint16_t fp32_to_fp16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00;  // NaN -> quiet NaN
  if (abs >= 0x38800000u) {                     // |f| >= 2^-14: a normal half (or overflow)
    // Round the 23-bit mantissa to 10 bits, ties to even; a carry bumps the exponent.
    uint32_t r = (abs + 0x0fffu + ((abs >> 13) & 1)) >> 13;
    r -= (127 - 15) << 10;  // rebias the exponent
    return sign | static_cast<uint16_t>(r >= 0x7c00 ? 0x7c00 : r);
  }
  // Subnormal half: the value in units of 2^-24, rounded ties-to-even (1024 = smallest normal).
  const float units = std::bit_cast<float>(abs) * 16777216.0f;  // exact: scaling by 2^24
  return sign | static_cast<uint16_t>(std::nearbyint(units));
}

inline float bf16_to_fp32(uint16_t h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

inline uint16_t fp32_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet NaN
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
}

}  // namespace channel
