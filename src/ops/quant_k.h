// quant_k.h: llama.cpp's K-quant super-blocks (256 elements: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K)
// and Q8_K, the activation blocks their dots take. Scalar references only; the SIMD kernels
// in backend/cpu are tested against these.
//
// Every K type is read through one unpacked form (KBlockParts): 256 unsigned quants u, an
// integer scale and minimum per 16 elements, the type's fixed offset, and two f32 factors;
//   value i = (d * sc[i / 16]) * (u[i] - offset) - dmin * m[i / 16],
// which is llama.cpp's dequantization term for term. A dot with Q8_K activations is
//   (d * d_x) * sum_g sc[g] * sum_{i in g} (u[i] - offset) * q_x[i]
//     - (dmin * d_x) * sum_g m[g] * bsums[g],
// with both sums exact integers.
#pragma once

#include <cstdint>

namespace channel {

inline constexpr int64_t kQK_K = 256;  // elements per K-quant super-block

struct BlockQ2_K {
  uint8_t scales[16];  // per 16 elements: scale (low nibble), minimum (high nibble)
  uint8_t qs[64];      // 2-bit quants
  uint16_t d, dmin;    // f16
};
static_assert(sizeof(BlockQ2_K) == 84);

struct BlockQ3_K {
  uint8_t hmask[32];   // third bit of each quant
  uint8_t qs[64];      // low 2 bits
  uint8_t scales[12];  // 16 six-bit scales, stored minus 32
  uint16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110);

struct BlockQ4_K {
  uint16_t d, dmin;
  uint8_t scales[12];  // 8 six-bit scales and 8 six-bit minimums (per 32 elements)
  uint8_t qs[128];
};
static_assert(sizeof(BlockQ4_K) == 144);

struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[32];  // fifth bit of each quant
  uint8_t qs[128];
};
static_assert(sizeof(BlockQ5_K) == 176);

struct BlockQ6_K {
  uint8_t ql[128];    // low 4 bits
  uint8_t qh[64];     // high 2 bits
  int8_t scales[16];  // per 16 elements
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210);

// Q8_K: value i = d * qs[i]; bsums[g] = sum of qs over elements 16g .. 16g + 15.
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};
static_assert(sizeof(BlockQ8_K) == 292);

struct KBlockParts {
  float d = 0, dmin = 0;
  int offset = 0;  // 4 for Q3_K, 32 for Q6_K, else 0
  uint8_t u[kQK_K];
  int16_t sc[kQK_K / 16];
  int16_t m[kQK_K / 16];
};

// The 6-bit scale and minimum j (0..7) of Q4_K/Q5_K's 12 packed scale bytes.
void k4_scale_min(const uint8_t scales[12], int j, int* sc, int* m);
// Q3_K's 16 scales (as stored, 0..63; the value is this minus 32).
void q3_k_scales(const uint8_t scales[12], int out[16]);

void unpack_q2_K(const void* row, int64_t i, KBlockParts* p);
void unpack_q3_K(const void* row, int64_t i, KBlockParts* p);
void unpack_q4_K(const void* row, int64_t i, KBlockParts* p);
void unpack_q5_K(const void* row, int64_t i, KBlockParts* p);
void unpack_q6_K(const void* row, int64_t i, KBlockParts* p);

// k a multiple of 256.
void dequantize_row_q2_K_ref(const void* x, float* y, int64_t k);
void dequantize_row_q3_K_ref(const void* x, float* y, int64_t k);
void dequantize_row_q4_K_ref(const void* x, float* y, int64_t k);
void dequantize_row_q5_K_ref(const void* x, float* y, int64_t k);
void dequantize_row_q6_K_ref(const void* x, float* y, int64_t k);

// llama.cpp's Q8_K quantizer: max = the signed value of largest magnitude, iscale = -127 / max,
// q = min(127, round_half_even(iscale * x)), d = 1 / iscale; an all-zero block is all zero.
void quantize_row_q8_K_ref(const float* x, void* y, int64_t k);

// Weights (row) · Q8_K activations (x), n_blocks super-blocks.
float dot_q2_K_ref(const void* w, const void* x, int64_t n_blocks);
float dot_q3_K_ref(const void* w, const void* x, int64_t n_blocks);
float dot_q4_K_ref(const void* w, const void* x, int64_t n_blocks);
float dot_q5_K_ref(const void* w, const void* x, int64_t n_blocks);
float dot_q6_K_ref(const void* w, const void* x, int64_t n_blocks);

}  // namespace channel
