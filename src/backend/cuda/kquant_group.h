// kquant_group.h: one 16-element group of a block kept as the file stores it, dequantized: the
// K-quant super-blocks (Q2_K .. Q6_K, 256 elements; layouts in ops/quant_k.h) and the legacy
// blocks K-quant files fall back to where a row is not a multiple of 256 (Q4_1, Q5_0, Q5_1, 32
// elements; ops/quant_legacy.h). Written once for the CUDA kernels, which keep these weights
// on the device exactly as the file stores them, and for the host, where
// cuda_kquant_group_test checks it against the references on any machine, GPU or not. Plain
// C++ outside nvcc: this header needs no CUDA.
//
// value i = (d * sc[g]) * (u[i] - offset) - dmin * m[g], the reference's arithmetic term for
// term, so the host results are bit-identical to dequantize_row_*_ref.
#pragma once

#include <cstdint>
#include <cstring>

#include "gguf/ggml_type.h"

#if defined(__CUDACC__)
#define CHANNEL_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define CHANNEL_HOST_DEVICE inline
#endif

namespace channel::cuda {

CHANNEL_HOST_DEVICE bool is_kquant(GgmlType t) {
  return t == GgmlType::Q2_K || t == GgmlType::Q3_K || t == GgmlType::Q4_K ||
         t == GgmlType::Q5_K || t == GgmlType::Q6_K;
}

// The legacy types with a minimum or a fifth bit, kept as the file's 32-element blocks.
CHANNEL_HOST_DEVICE bool is_legacy_block(GgmlType t) {
  return t == GgmlType::Q4_1 || t == GgmlType::Q5_0 || t == GgmlType::Q5_1;
}

// Whether the device keeps t as the file's blocks and reads it through kq_group16.
CHANNEL_HOST_DEVICE bool is_file_block(GgmlType t) {
  return is_kquant(t) || is_legacy_block(t);
}

// Elements of one block (256 for a K-quant, 32 for a legacy type, 0 for other types).
CHANNEL_HOST_DEVICE int kq_block_elements(GgmlType t) {
  return is_kquant(t) ? 256 : is_legacy_block(t) ? 32 : 0;
}

// Bytes of one block (0 for other types).
CHANNEL_HOST_DEVICE int kq_block_bytes(GgmlType t) {
  switch (t) {
    case GgmlType::Q2_K: return 84;
    case GgmlType::Q3_K: return 110;
    case GgmlType::Q4_K: return 144;
    case GgmlType::Q5_K: return 176;
    case GgmlType::Q6_K: return 210;
    case GgmlType::Q4_1:
      return 20;  // d | m | qs[16]
    case GgmlType::Q5_0:
      return 22;  // d | qh[4] | qs[16]
    case GgmlType::Q5_1:
      return 24;  // d | m | qh[4] | qs[16]
    default: return 0;
  }
}

// The little-endian f16 at p, widened exactly (subnormals, infinities and NaN included).
CHANNEL_HOST_DEVICE float kq_half(const uint8_t* p) {
  const uint32_t h = static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8);
  const uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
  if (exp == 0x1fu) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {  // subnormal: shift the mantissa up to its leading one
    exp = 113;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
  }
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
#endif
}

// Q4_K/Q5_K's 6-bit scale and minimum of sub-block j (0..7), as ops/quant_k.h's k4_scale_min.
CHANNEL_HOST_DEVICE void kq_scale_min_k4(const uint8_t* q, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// The legacy block's group g (0: elements 0..15, the low nibbles; 1: 16..31, the high ones):
// its scale, its minimum (Q4_1, Q5_1; as dmin = -m, m = 1 below) and its values before both.
CHANNEL_HOST_DEVICE void legacy_group16(GgmlType t, const uint8_t* b, int g, float* d, float* dmin,
                                        int* m, int* offset, uint8_t* u) {
  *d = kq_half(b);
  const bool has_min = t != GgmlType::Q5_0, five = t != GgmlType::Q4_1;
  if (has_min) {
    *dmin = -kq_half(b + 2);
    *m = 1;
  }
  const uint8_t* qh = b + (has_min ? 4 : 2);
  const uint8_t* qs = qh + (five ? 4 : 0);
  const uint32_t high = static_cast<uint32_t>(qh[0]) | (static_cast<uint32_t>(qh[1]) << 8) |
                        (static_cast<uint32_t>(qh[2]) << 16) | (static_cast<uint32_t>(qh[3]) << 24);
  *offset = t == GgmlType::Q5_0 ? 16 : 0;
  for (int i = 0; i < 16; ++i) {
    int q = g ? qs[i] >> 4 : qs[i] & 0x0f;
    if (five) q |= static_cast<int>((high >> (16 * g + i)) & 1u) << 4;
    u[i] = static_cast<uint8_t>(q);
  }
}

// out[i] = element 16 g + i of the block at b (g below kq_block_elements(t) / 16). t must be
// a type of is_file_block.
CHANNEL_HOST_DEVICE void kq_group16(GgmlType t, const uint8_t* b, int g, float* out) {
  float d = 0.0f, dmin = 0.0f;
  int sc = 1, m = 0, offset = 0;
  uint8_t u[16];
  // Within a group the element index e = 16 g + i has fixed n = e / 128 and k = (e % 128) / 32;
  // l = e % 32 runs over 16 (g % 2) .. 16 (g % 2) + 15.
  const int n = g / 8, k = (g % 8) / 2, l0 = 16 * (g % 2);
  switch (t) {
    case GgmlType::Q4_1:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
      legacy_group16(t, b, g, &d, &dmin, &m, &offset, u);
      break;
    case GgmlType::Q2_K: {  // scales[16] | qs[64] | d | dmin
      d = kq_half(b + 80);
      dmin = kq_half(b + 82);
      sc = b[g] & 0x0f;
      m = b[g] >> 4;
      for (int i = 0; i < 16; ++i) u[i] = (b[16 + 32 * n + l0 + i] >> (2 * k)) & 3;
      break;
    }
    case GgmlType::Q3_K: {  // hmask[32] | qs[64] | scales[12] | d
      d = kq_half(b + 108);
      const uint8_t* s = b + 96;
      const int low = g < 8 ? s[g] & 0x0f : s[g - 8] >> 4;
      const int high = (s[8 + g % 4] >> (2 * (g / 4))) & 3;
      sc = (low | (high << 4)) - 32;
      offset = 4;
      for (int i = 0; i < 16; ++i) {
        const int l = l0 + i;
        u[i] = static_cast<uint8_t>(((b[32 + 32 * n + l] >> (2 * k)) & 3) |
                                    (((b[l] >> (4 * n + k)) & 1) << 2));
      }
      break;
    }
    case GgmlType::Q4_K:
    case GgmlType::Q5_K: {  // d | dmin | scales[12] | (Q5_K: qh[32]) | qs[128]
      d = kq_half(b);
      dmin = kq_half(b + 2);
      // Element 64 j + l (l < 32) is the low nibble of qs[32 j + l], 64 j + 32 + l the high.
      const int j = g / 4, hi = (g / 2) % 2, lq = 16 * (g % 2);
      kq_scale_min_k4(b + 4, 2 * j + hi, &sc, &m);
      const bool five = t == GgmlType::Q5_K;
      const uint8_t* qs = b + (five ? 48 : 16);
      for (int i = 0; i < 16; ++i) {
        const int l = lq + i;
        int q = hi ? qs[32 * j + l] >> 4 : qs[32 * j + l] & 0x0f;
        if (five) q |= ((b[16 + l] >> (2 * j + hi)) & 1) << 4;
        u[i] = static_cast<uint8_t>(q);
      }
      break;
    }
    default: {  // Q6_K: ql[128] | qh[64] | scales[16] (int8) | d
      d = kq_half(b + 208);
      sc = static_cast<int8_t>(b[192 + g]);
      offset = 32;
      for (int i = 0; i < 16; ++i) {
        const int l = l0 + i;
        const uint8_t ql = b[64 * n + 32 * (k % 2) + l];
        const int low = k < 2 ? ql & 0x0f : ql >> 4;
        const int high = (b[128 + 32 * n + l] >> (2 * k)) & 3;
        u[i] = static_cast<uint8_t>(low | (high << 4));
      }
      break;
    }
  }
  const float dl = d * static_cast<float>(sc);
  const float ml = dmin * static_cast<float>(m);
  for (int i = 0; i < 16; ++i) out[i] = dl * static_cast<float>(u[i] - offset) - ml;
}

// Group g (counted from the row's first element, 16 a group) of a row of t's blocks at row.
CHANNEL_HOST_DEVICE void kq_row_group16(GgmlType t, const uint8_t* row, int64_t g, float* out) {
  const int per_block = kq_block_elements(t) / 16;
  kq_group16(t, row + (g / per_block) * kq_block_bytes(t), static_cast<int>(g % per_block), out);
}

// Bytes of a row of cols elements of t's blocks.
CHANNEL_HOST_DEVICE int64_t kq_row_bytes(GgmlType t, int64_t cols) {
  return cols / kq_block_elements(t) * kq_block_bytes(t);
}

}  // namespace channel::cuda
